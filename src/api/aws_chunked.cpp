#include "api/aws_chunked.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <zlib.h>

#include <array>
#include <boost/crc.hpp>
#include <charconv>
#include <cstdint>
#include <optional>

#include "core/strings.h"

namespace ty::api {

namespace {

constexpr size_t kMaxChunkHeaderLine = 4096;  // "<hex>;chunk-signature=<64 hex>" is ~100 bytes
constexpr size_t kMaxTrailerBytes = 16 * 1024;
constexpr int kMaxTrailerLines = 32;

// sha256("") in hex: the empty "headers" hash of every chunk's string to sign.
constexpr std::string_view kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// The checksum algorithms S3 accepts, by the suffix of their header name.
constexpr std::array<std::string_view, 5> kChecksums = {"crc32", "crc32c", "crc64nvme", "sha1", "sha256"};
constexpr std::string_view kChecksumPrefix = "x-amz-checksum-";

Status S3Error(Code code, std::string_view s3_code, const std::string& message) {
  return {code, std::string(s3_code) + ": " + message};
}
Status Incomplete(const std::string& m) { return S3Error(Code::kInvalidArgument, "IncompleteBody", m); }
Status BadTrailer(const std::string& m) { return S3Error(Code::kInvalidArgument, "MalformedTrailerError", m); }
Status InvalidRequest(const std::string& m) { return S3Error(Code::kInvalidArgument, "InvalidRequest", m); }
Status SignatureMismatch(const std::string& m) { return S3Error(Code::kBadSignature, "SignatureDoesNotMatch", m); }

const std::string* FindHeader(const HeaderList& headers, std::string_view lower_name) {
  for (const auto& [k, v] : headers)
    if (EqualsIgnoreCase(k, lower_name)) return &v;
  return nullptr;
}

std::string Digest(const EVP_MD* md, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, md, nullptr);
  return std::string(reinterpret_cast<const char*>(out), n);
}

template <typename Int>
std::string BigEndian(Int value) {
  std::string out(sizeof(value), '\0');
  for (size_t i = 0; i < sizeof(value); ++i)
    out[i] = static_cast<char>((value >> (8 * (sizeof(value) - 1 - i))) & 0xff);
  return out;
}

template <typename Crc>
std::string CrcBigEndian(std::string_view data) {
  Crc crc;
  crc.process_bytes(data.data(), data.size());
  return BigEndian(crc.checksum());
}

// CRC32 (ISO-HDLC, what x-amz-checksum-crc32 carries) through zlib, which works a word at a time:
// boto3 sends it with every upload, and boost's byte-wise table was a quarter of a large PUT's time.
std::string Crc32BigEndian(std::string_view data) {
  return BigEndian(static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()), data.size())));
}

using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;
using Crc64Nvme = boost::crc_optimal<64, 0xAD93D23594C93659ULL, ~0ULL, ~0ULL, true, true>;

// The raw checksum bytes, or nullopt for an unknown algorithm.
std::optional<std::string> ChecksumBytes(std::string_view algorithm, std::string_view data) {
  if (algorithm == "crc32") return Crc32BigEndian(data);
  if (algorithm == "crc32c") return CrcBigEndian<Crc32c>(data);
  if (algorithm == "crc64nvme") return CrcBigEndian<Crc64Nvme>(data);
  if (algorithm == "sha1") return Digest(EVP_sha1(), data);
  if (algorithm == "sha256") return Digest(EVP_sha256(), data);
  return std::nullopt;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool IsLowerHex64(std::string_view v) {
  if (v.size() != 64) return false;
  for (char c : v)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The body being decoded and how far it has been read. Every read is bounded by `in`.
struct Cursor {
  std::string_view in;
  size_t pos = 0;

  size_t left() const { return in.size() - pos; }

  // The next line (without its CRLF), at most `max` bytes; nullopt when no CRLF comes within it.
  std::optional<std::string_view> Line(size_t max) {
    std::string_view rest = in.substr(pos, max + 2);
    size_t end = rest.find("\r\n");
    if (end == std::string_view::npos) return std::nullopt;
    pos += end + 2;
    return rest.substr(0, end);
  }

  bool Crlf() {
    if (left() < 2 || in.compare(pos, 2, "\r\n") != 0) return false;
    pos += 2;
    return true;
  }
};

// Parses a chunk size: 1..16 hex digits whose value is at most `bound`.
std::optional<uint64_t> ParseChunkSize(std::string_view hex, uint64_t bound) {
  if (hex.empty() || hex.size() > 16) return std::nullopt;
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
  if (ec != std::errc() || ptr != hex.data() + hex.size() || value > bound) return std::nullopt;
  return value;
}

// The string a chunk or trailer signature signs: `algorithm` ("AWS4-HMAC-SHA256-PAYLOAD" or
// "-TRAILER"), the request's time and scope, the previous signature, then `hashes` (the lines that
// differ: a chunk's empty-hash line and data hash, a trailer's hash).
std::string StreamingStringToSign(std::string_view algorithm, const VerifiedCaller& caller, std::string_view previous,
                                  std::string_view hashes) {
  std::string s(algorithm);
  for (std::string_view line : {std::string_view(caller.amz_date), std::string_view(caller.scope), previous, hashes}) {
    s += '\n';
    s += line;
  }
  return s;
}

std::string ChunkStringToSign(const VerifiedCaller& caller, std::string_view previous, std::string_view data) {
  return StreamingStringToSign("AWS4-HMAC-SHA256-PAYLOAD", caller, previous,
                               std::string(kEmptySha256) + "\n" + Sha256Hex(data));
}

std::string TrailerStringToSign(const VerifiedCaller& caller, std::string_view previous,
                                std::string_view canonical_trailers) {
  return StreamingStringToSign("AWS4-HMAC-SHA256-TRAILER", caller, previous, Sha256Hex(canonical_trailers));
}

// The algorithm of a checksum header name ("x-amz-checksum-crc32" -> "crc32"), or "".
std::string_view ChecksumAlgorithmOf(std::string_view lower_name) {
  if (lower_name.substr(0, kChecksumPrefix.size()) != kChecksumPrefix) return {};
  std::string_view algorithm = lower_name.substr(kChecksumPrefix.size());
  for (auto known : kChecksums)
    if (algorithm == known) return known;
  return {};
}

Status CheckOneChecksum(std::string_view header_name, std::string_view algorithm, std::string_view value,
                        std::string_view body) {
  std::optional<std::string> given = Base64Decode(Trim(value), 1024);
  std::string want = *ChecksumBytes(algorithm, body);
  if (!given || given->size() != want.size())
    return InvalidRequest("Value for " + std::string(header_name) + " header is invalid: it must be the base64 of the " +
                          std::to_string(want.size()) + "-byte " + ToUpper(algorithm) + " of the body");
  if (!ConstantTimeEquals(*given, want))
    return S3Error(Code::kInvalidArgument, "BadDigest",
                   "The " + ToUpper(algorithm) + " you specified did not match the calculated checksum (" +
                       std::string(header_name) + ": " + std::string(Trim(value)) + ", calculated " + Base64Encode(want) + ")");
  return Status::Ok();
}

}  // namespace

std::string ChecksumBase64(std::string_view algorithm, std::string_view body) {
  std::optional<std::string> bytes = ChecksumBytes(algorithm, body);
  return bytes ? Base64Encode(*bytes) : std::string();
}

StatusOr<std::string> DecodeAwsChunked(std::string_view body, const HeaderList& headers,
                                       const VerifiedCaller& caller) {
  const bool signed_chunks = caller.payload_mode == PayloadMode::kStreamingSigned ||
                             caller.payload_mode == PayloadMode::kStreamingSignedTrailer;
  const bool has_trailer = caller.payload_mode == PayloadMode::kStreamingSignedTrailer ||
                           caller.payload_mode == PayloadMode::kStreamingUnsignedTrailer;
  if (!signed_chunks && !has_trailer)
    return InvalidRequest("the body is aws-chunked only when x-amz-content-sha256 is one of the STREAMING- values");

  const std::string* declared_text = FindHeader(headers, "x-amz-decoded-content-length");
  if (!declared_text)
    return S3Error(Code::kInvalidArgument, "MissingContentLength",
                   "an aws-chunked body requires the x-amz-decoded-content-length header");
  uint64_t declared = 0;
  {
    std::string_view t = Trim(*declared_text);
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), declared);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size())
      return InvalidRequest("x-amz-decoded-content-length must be a non-negative integer, not '" +
                            std::string(t.substr(0, 40)) + "'");
  }
  // The decoded bytes are fewer than the encoded ones: a larger claim is a lie found before reading.
  if (declared > body.size())
    return Incomplete("x-amz-decoded-content-length " + std::to_string(declared) + " is more than the " +
                      std::to_string(body.size()) + " bytes of the encoded body");

  std::string expected_trailer;  // lower-case header name, from x-amz-trailer
  if (has_trailer) {
    const std::string* t = FindHeader(headers, "x-amz-trailer");
    if (!t) return InvalidRequest("an aws-chunked body with a trailer requires the x-amz-trailer header");
    expected_trailer = ToLower(Trim(*t));
    if (ChecksumAlgorithmOf(expected_trailer).empty())
      return InvalidRequest("x-amz-trailer must name one checksum header (x-amz-checksum-crc32, -crc32c, "
                            "-crc64nvme, -sha1 or -sha256), not '" + expected_trailer.substr(0, 80) + "'");
  }

  std::string out;
  out.reserve(static_cast<size_t>(declared));
  Cursor c{body};
  std::string previous = caller.seed_signature;
  for (int index = 1;; ++index) {
    const std::string where = "chunk " + std::to_string(index);
    std::optional<std::string_view> line = c.Line(kMaxChunkHeaderLine);
    if (!line) return Incomplete(where + " has no complete size line (the body ends or the line is malformed)");
    std::string_view size_text = *line;
    std::string_view signature;
    if (signed_chunks) {
      size_t semi = line->find(';');
      constexpr std::string_view kSig = "chunk-signature=";
      if (semi == std::string_view::npos || line->substr(semi + 1, kSig.size()) != kSig)
        return Incomplete(where + "'s size line must be '<hex size>;chunk-signature=<signature>'");
      size_text = line->substr(0, semi);
      signature = line->substr(semi + 1 + kSig.size());
      if (!IsLowerHex64(signature))
        return SignatureMismatch(where + "'s chunk-signature must be 64 lower-case hex digits");
    }
    std::optional<uint64_t> size = ParseChunkSize(size_text, c.left());
    if (!size)
      return Incomplete(where + "'s size '" + std::string(size_text.substr(0, 20)) +
                        "' is not a hex number of bytes that the rest of the body holds");
    if (out.size() + *size > declared)
      return Incomplete("the chunks hold more than x-amz-decoded-content-length (" + std::to_string(declared) + ") bytes");
    std::string_view data = body.substr(c.pos, static_cast<size_t>(*size));
    c.pos += static_cast<size_t>(*size);
    if (signed_chunks) {
      std::string want = ToHex(HmacSha256(caller.signing_key, ChunkStringToSign(caller, previous, data)));
      if (!ConstantTimeEquals(want, signature))
        return SignatureMismatch("The chunk signature of " + where +
                                 " does not match: each chunk must be signed after the previous one, from the "
                                 "request's signature");
      previous = std::move(want);
    }
    if (*size == 0) break;
    if (!c.Crlf()) return Incomplete(where + "'s " + std::to_string(*size) + " bytes are not followed by CRLF");
    out.append(data);
  }

  // After the final chunk: the trailer lines (if any), then an empty line ending the body.
  HeaderList trailers;
  std::string canonical_trailers;
  std::string trailer_signature;
  size_t trailer_bytes = 0;
  for (;;) {
    std::optional<std::string_view> line = c.Line(kMaxTrailerBytes);
    if (!line) return Incomplete("the body ends without the empty line that closes it");
    if (line->empty()) break;
    trailer_bytes += line->size();
    if (!has_trailer)
      return BadTrailer("the body carries trailing data after the final chunk, but x-amz-content-sha256 announces none");
    if (!trailer_signature.empty())
      return BadTrailer("x-amz-trailer-signature must be the last trailer line");
    if (trailer_bytes > kMaxTrailerBytes || static_cast<int>(trailers.size()) >= kMaxTrailerLines)
      return BadTrailer("the trailer is larger than " + std::to_string(kMaxTrailerBytes) + " bytes or " +
                        std::to_string(kMaxTrailerLines) + " lines");
    size_t colon = line->find(':');
    if (colon == std::string_view::npos || colon == 0)
      return BadTrailer("a trailer line must be '<name>:<value>'");
    std::string name = ToLower(Trim(line->substr(0, colon)));
    std::string_view value = Trim(line->substr(colon + 1));
    if (name == "x-amz-trailer-signature") {
      if (caller.payload_mode != PayloadMode::kStreamingSignedTrailer)
        return BadTrailer("x-amz-trailer-signature is sent only with STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER");
      trailer_signature = std::string(value);
      if (trailer_signature.empty()) return BadTrailer("x-amz-trailer-signature is empty");
      continue;
    }
    canonical_trailers += name + ":" + std::string(value) + "\n";
    trailers.emplace_back(std::move(name), std::string(value));
  }
  if (c.left() != 0)
    return Incomplete(std::to_string(c.left()) + " bytes follow the end of the aws-chunked body");

  if (caller.payload_mode == PayloadMode::kStreamingSignedTrailer) {
    if (trailer_signature.empty()) return BadTrailer("the trailer must end with x-amz-trailer-signature");
    std::string want = ToHex(HmacSha256(caller.signing_key, TrailerStringToSign(caller, previous, canonical_trailers)));
    if (!ConstantTimeEquals(want, trailer_signature))
      return SignatureMismatch("The trailer signature does not match: it must sign the trailer lines after the final chunk");
  }

  if (out.size() != declared)
    return Incomplete("the chunks hold " + std::to_string(out.size()) + " bytes, not x-amz-decoded-content-length (" +
                      std::to_string(declared) + ")");

  if (has_trailer) {
    const std::string* value = nullptr;
    for (const auto& [name, v] : trailers) {
      if (name != expected_trailer)
        return BadTrailer("the trailer carries " + name + ", which x-amz-trailer (" + expected_trailer + ") does not name");
      value = &v;
    }
    if (!value) return BadTrailer("the trailer " + expected_trailer + " named by x-amz-trailer is missing");
    TY_RETURN_IF_ERROR(CheckOneChecksum(expected_trailer, ChecksumAlgorithmOf(expected_trailer), *value, out));
  }
  return out;
}

Status CheckPayloadChecksums(std::string_view body, const HeaderList& headers) {
  if (const std::string* md5 = FindHeader(headers, "content-md5")) {
    std::optional<std::string> given = Base64Decode(Trim(*md5), 1024);
    if (!given || given->size() != 16)
      return S3Error(Code::kInvalidArgument, "InvalidDigest",
                     "The Content-MD5 you specified is not valid: it must be the base64 of the body's 16-byte MD5");
    if (!ConstantTimeEquals(*given, Digest(EVP_md5(), body)))
      return S3Error(Code::kInvalidArgument, "BadDigest", "The Content-MD5 you specified did not match what we received.");
  }
  const std::pair<std::string, std::string>* checksum = nullptr;
  for (const auto& h : headers) {
    if (ChecksumAlgorithmOf(ToLower(h.first)).empty()) continue;
    if (checksum && !EqualsIgnoreCase(checksum->first, h.first))
      return InvalidRequest("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.");
    if (checksum) return InvalidRequest("Expecting a single " + ToLower(h.first) + " header.");
    checksum = &h;
  }
  if (!checksum) return Status::Ok();
  std::string name = ToLower(checksum->first);
  return CheckOneChecksum(name, ChecksumAlgorithmOf(name), checksum->second, body);
}

}  // namespace ty::api
