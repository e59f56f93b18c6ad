// SigV4 verification (api/sigv4.h) over any request: the Authorization header, the presigned query
// parameters, the date headers and the canonicalisation of path, query and headers.
//
// Input: a request head as written on the wire, then the body:
//   METHOD SP TARGET LF          (TARGET = path, optionally '?' query)
//   (NAME ':' VALUE LF)*         (one space after ':' is dropped; a line without ':' is a name)
//   LF
//   BODY
// Checked besides "no crash": a request that verifies names the one known key; and a request
// the signer signs (exactly one Host header, header names made of token characters, values
// without control characters, no x-amz-content-sha256) verifies, so signer and verifier agree on the canonical form.
#include <cstdio>
#include <cstdlib>

#include "api/sigv4.h"
#include "fuzz_input.h"

namespace {

using ty::api::HttpRequestView;

constexpr char kKey[] = "AKIDEXAMPLE";
constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr ty::EpochMs kNow = 1767323045000;  // 2026-01-02T03:04:05Z, the seeds' X-Amz-Date

HttpRequestView ParseRequest(std::string_view in) {
  HttpRequestView req;
  auto [request_line, rest] = ty::fuzz::SplitFirstLine(in);
  size_t sp = request_line.find(' ');
  req.method = std::string(request_line.substr(0, sp));
  std::string_view target = sp == std::string_view::npos ? std::string_view() : request_line.substr(sp + 1);
  size_t q = target.find('?');
  req.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
  while (!rest.empty()) {
    auto [line, after] = ty::fuzz::SplitFirstLine(rest);
    rest = after;
    if (line.empty()) break;
    size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    req.headers.emplace_back(std::string(name), std::string(value));
  }
  req.body = rest;  // a view into the fuzzer's input, which outlives the request
  return req;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool Signable(const HttpRequestView& req) {
  int hosts = 0;
  for (const auto& [name, value] : req.headers) {
    if (!IsToken(name)) return false;
    for (unsigned char c : value)
      if (c < 0x20 || c == 0x7f) return false;
    std::string lower;
    for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "host") ++hosts;
    if (lower == "x-amz-content-sha256") return false;  // a wrong body hash is meant to fail
  }
  return hosts == 1 && IsToken(req.method);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HttpRequestView req = ParseRequest(ty::fuzz::AsText(data, size));
  const ty::api::SecretLookup lookup = [](std::string_view key) -> std::optional<std::string> {
    if (key == kKey) return std::string(kSecret);
    return std::nullopt;
  };
  const std::vector<std::string> services = {"batch", "sagemaker", "logs", "service"};

  auto verified = ty::api::VerifySigV4(req, lookup, "us-east-1", services, kNow);
  if (verified.ok() && verified->access_key_id != kKey) {
    std::fprintf(stderr, "verified an unknown key: %s\n", verified->access_key_id.c_str());
    abort();
  }
  // What passes whole passes from its head alone (the listener checks the head before the body).
  const std::vector<std::string> with_s3 = {"batch", "sagemaker", "logs", "service", "s3"};
  if (ty::api::VerifySigV4(req, lookup, "us-east-1", with_s3, kNow).ok() &&
      !ty::api::VerifySigV4Head(req, lookup, "us-east-1", with_s3, kNow).ok()) {
    std::fprintf(stderr, "a request that verifies whole fails at its head\n");
    abort();
  }

  if (Signable(req)) {
    ty::api::SignSigV4(req, {kKey, kSecret}, "us-east-1", "batch", kNow);
    auto again = ty::api::VerifySigV4(req, lookup, "us-east-1", services, kNow);
    if (!again.ok()) {
      std::fprintf(stderr, "a request the signer signed does not verify: %s\n",
                   again.status().message().c_str());
      abort();
    }
  }
  return 0;
}
