// aws-chunked decoding and payload checksums (api/aws_chunked.h) over any body.
//
// Input: one line of settings, then the body:
//   MODE SP DECODED-LENGTH SP TRAILER LF      (MODE: s = STREAMING-AWS4-HMAC-SHA256-PAYLOAD,
//   BODY                                       t = ...-PAYLOAD-TRAILER, u = STREAMING-UNSIGNED-
//                                              PAYLOAD-TRAILER; TRAILER: x-amz-trailer, may be empty)
// The body is copied into a buffer of exactly its size, so a read past it is an ASan report.
// Checked besides "no crash": a decoded body is exactly x-amz-decoded-content-length bytes and
// no longer than its encoding; and the body's bytes encoded here as the SDKs encode them (chunks
// signed from the seed, a CRC32 trailer, signed in mode t) decode back to the same bytes.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "api/aws_chunked.h"
#include "core/strings.h"
#include "fuzz_input.h"

namespace {

using ty::api::HeaderList;
using ty::api::PayloadMode;
using ty::api::VerifiedCaller;

VerifiedCaller Caller(char mode) {
  VerifiedCaller c;
  c.service = "s3";
  c.signing_key = ty::HmacSha256("AWS4secret", "20260102");
  c.amz_date = "20260102T030405Z";
  c.scope = "20260102/us-east-1/s3/aws4_request";
  c.seed_signature = ty::Sha256Hex("seed");
  c.payload_mode = mode == 't' ? PayloadMode::kStreamingSignedTrailer
                   : mode == 'u' ? PayloadMode::kStreamingUnsignedTrailer
                                 : PayloadMode::kStreamingSigned;
  return c;
}

// `data` as a client encodes it, in chunks of `chunk` bytes.
std::string Encode(const VerifiedCaller& c, std::string_view data, size_t chunk) {
  const bool signed_chunks = c.payload_mode != PayloadMode::kStreamingUnsignedTrailer;
  std::string out, previous = c.seed_signature;
  auto sign = [&](std::string_view piece) {
    previous = ty::ToHex(ty::HmacSha256(c.signing_key, "AWS4-HMAC-SHA256-PAYLOAD\n" + c.amz_date + "\n" + c.scope +
                                                           "\n" + previous + "\n" + ty::Sha256Hex("") + "\n" +
                                                           ty::Sha256Hex(piece)));
    return previous;
  };
  for (size_t at = 0;; at += chunk) {
    std::string_view piece = data.substr(std::min(at, data.size()), chunk);
    char size[20];
    std::snprintf(size, sizeof size, "%zx", piece.size());
    out += size;
    if (signed_chunks) out += ";chunk-signature=" + sign(piece);
    out += "\r\n";
    if (piece.empty()) break;
    out += std::string(piece) + "\r\n";
  }
  if (c.payload_mode != PayloadMode::kStreamingSigned) {
    std::string line = "x-amz-checksum-crc32:" + ty::api::ChecksumBase64("crc32", data);
    out += line + "\r\n";
    if (c.payload_mode == PayloadMode::kStreamingSignedTrailer)
      out += "x-amz-trailer-signature:" +
             ty::ToHex(ty::HmacSha256(c.signing_key, "AWS4-HMAC-SHA256-TRAILER\n" + c.amz_date + "\n" + c.scope +
                                                         "\n" + previous + "\n" + ty::Sha256Hex(line + "\n"))) +
             "\r\n";
  }
  return out + "\r\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [settings, body] = ty::fuzz::SplitFirstLine(ty::fuzz::AsText(data, size));
  std::vector<std::string> fields = ty::Split(settings, ' ');
  const char mode = !fields.empty() && !fields[0].empty() ? fields[0][0] : 's';
  HeaderList headers;
  if (fields.size() > 1) headers.emplace_back("x-amz-decoded-content-length", fields[1]);
  if (fields.size() > 2 && !fields[2].empty()) headers.emplace_back("x-amz-trailer", fields[2]);
  const VerifiedCaller caller = Caller(mode);

  auto exact = std::make_unique<char[]>(body.size() + 1);
  std::copy(body.begin(), body.end(), exact.get());
  std::string_view copy(exact.get(), body.size());
  auto decoded = ty::api::DecodeAwsChunked(copy, headers, caller);
  if (decoded.ok() && (decoded->size() > copy.size() || std::to_string(decoded->size()) != fields[1])) abort();
  (void)ty::api::CheckPayloadChecksums(copy, {{"Content-MD5", std::string(settings)},
                                              {"x-amz-checksum-" + (fields.size() > 2 ? fields[2] : std::string()),
                                               std::string(settings)}});

  // The round trip: the body's bytes as plain data.
  size_t chunk = 1 + (body.empty() ? 0 : static_cast<unsigned char>(body[0]) % 64);
  HeaderList round_headers = {{"x-amz-decoded-content-length", std::to_string(body.size())},
                              {"x-amz-trailer", "x-amz-checksum-crc32"}};
  auto back = ty::api::DecodeAwsChunked(Encode(caller, body, chunk), round_headers, caller);
  if (!back.ok() || *back != body) {
    std::fprintf(stderr, "round trip failed: %s\n", back.ok() ? "bytes differ" : back.status().message().c_str());
    abort();
  }
  return 0;
}
