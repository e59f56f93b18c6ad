// aws-chunked bodies and payload checksums: AWS's published chunked-upload example (64 KiB + 1 KiB,
// its seed and chunk signatures), botocore's unsigned-trailer encoding (AwsChunkedWrapper), signed
// trailers, and one test per corruption: each must be refused with S3's code, never decoded.
#include "api/aws_chunked.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/strings.h"

namespace ty::api {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- AWS's example: "Signature Calculation: Transfer Payload in Multiple Chunks" --------------------
// PUT /examplebucket/chunkObject.txt, 66560 bytes of 'a' sent as 65536 + 1024 + the final chunk.

constexpr char kAwsSeed[] = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
constexpr char kAwsChunk1[] = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648";
constexpr char kAwsChunk2[] = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497";
constexpr char kAwsFinal[] = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9";

HeaderList AwsHeaders() {
  return {{"Host", "s3.amazonaws.com"},
          {"x-amz-date", "20130524T000000Z"},
          {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
          {"Authorization",
           "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
           "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
           "x-amz-decoded-content-length;x-amz-storage-class,Signature=" + std::string(kAwsSeed)},
          {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
          {"Content-Encoding", "aws-chunked"},
          {"x-amz-decoded-content-length", "66560"},
          {"Content-Length", "66824"}};
}

std::string AwsBody() {
  return "10000;chunk-signature=" + std::string(kAwsChunk1) + "\r\n" + std::string(65536, 'a') + "\r\n" +
         "400;chunk-signature=" + std::string(kAwsChunk2) + "\r\n" + std::string(1024, 'a') + "\r\n" +
         "0;chunk-signature=" + std::string(kAwsFinal) + "\r\n\r\n";
}

// The caller as VerifySigV4 reports it for AWS's example request (checked by the first test).
VerifiedCaller AwsCaller() {
  const std::string body = AwsBody();  // the view borrows it
  HttpRequestView req{"PUT", "/examplebucket/chunkObject.txt", "", AwsHeaders(), body};
  auto lookup = [](std::string_view key) -> std::optional<std::string> {
    if (key == "AKIAIOSFODNN7EXAMPLE") return std::string("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    return std::nullopt;
  };
  EpochMs now = 0;
  EXPECT_TRUE(ParseAmzDate("20130524T000000Z", &now));
  auto caller = VerifySigV4(req, lookup, "us-east-1", {"s3"}, now);
  EXPECT_TRUE(caller.ok()) << caller.status().message();
  return caller.ok() ? *caller : VerifiedCaller{};
}

TEST(AwsChunked, AwsExampleRequestVerifiesWithItsPublishedSeedSignature) {
  VerifiedCaller caller = AwsCaller();
  EXPECT_EQ(caller.seed_signature, kAwsSeed);
  EXPECT_EQ(caller.payload_mode, PayloadMode::kStreamingSigned);
  EXPECT_EQ(caller.scope, "20130524/us-east-1/s3/aws4_request");
  EXPECT_EQ(AwsBody().size(), 66824u);
}

TEST(AwsChunked, DecodesAwsExampleCheckingItsPublishedChunkSignatures) {
  auto plain = DecodeAwsChunked(AwsBody(), AwsHeaders(), AwsCaller());
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, std::string(66560, 'a'));
}

void ExpectRefused(const StatusOr<std::string>& got, std::string_view s3_code, const std::string& trace = "") {
  ASSERT_FALSE(got.ok()) << trace;
  EXPECT_THAT(got.status().message(), StartsWith(std::string(s3_code) + ": ")) << trace;
}

TEST(AwsChunked, ABadChunkSignatureIsRefused) {
  std::string body = AwsBody();
  size_t at = body.find(kAwsChunk2);
  body[at] = body[at] == '0' ? '1' : '0';
  auto got = DecodeAwsChunked(body, AwsHeaders(), AwsCaller());
  ExpectRefused(got, "SignatureDoesNotMatch");
  EXPECT_THAT(got.status().message(), HasSubstr("chunk 2"));
  EXPECT_EQ(got.status().code(), Code::kBadSignature);
}

TEST(AwsChunked, ChangedDataUnderAValidSignatureIsRefused) {
  std::string body = AwsBody();
  body[body.find("\r\n") + 2 + 100] = 'b';
  ExpectRefused(DecodeAwsChunked(body, AwsHeaders(), AwsCaller()), "SignatureDoesNotMatch");
}

TEST(AwsChunked, AnotherSeedBreaksTheChain) {
  VerifiedCaller caller = AwsCaller();
  caller.seed_signature[0] = caller.seed_signature[0] == 'f' ? 'e' : 'f';
  ExpectRefused(DecodeAwsChunked(AwsBody(), AwsHeaders(), caller), "SignatureDoesNotMatch");
}

TEST(AwsChunked, AMissingFinalChunkIsIncomplete) {
  std::string body = AwsBody();
  body.resize(body.find("0;chunk-signature="));
  ExpectRefused(DecodeAwsChunked(body, AwsHeaders(), AwsCaller()), "IncompleteBody");
}

TEST(AwsChunked, EveryTruncationIsRefused) {
  const std::string body = AwsBody();
  const VerifiedCaller caller = AwsCaller();
  for (size_t n : {size_t{0}, size_t{5}, size_t{87}, size_t{88}, size_t{1000}, size_t{65625}, size_t{65626},
                   body.size() - 86, body.size() - 3, body.size() - 2, body.size() - 1}) {
    auto got = DecodeAwsChunked(std::string_view(body).substr(0, n), AwsHeaders(), caller);
    EXPECT_FALSE(got.ok()) << "decoded a body cut to " << n << " bytes";
  }
}

TEST(AwsChunked, TheDecodedLengthMustBeTheDeclaredOne) {
  for (const char* declared : {"66559", "66561", "0", "999999999"}) {
    HeaderList headers = AwsHeaders();
    for (auto& [k, v] : headers)
      if (k == "x-amz-decoded-content-length") v = declared;
    ExpectRefused(DecodeAwsChunked(AwsBody(), headers, AwsCaller()), "IncompleteBody", declared);
  }
  HeaderList without = AwsHeaders();
  std::erase_if(without, [](const auto& h) { return h.first == "x-amz-decoded-content-length"; });
  ExpectRefused(DecodeAwsChunked(AwsBody(), without, AwsCaller()), "MissingContentLength");
}

TEST(AwsChunked, AChunkSizeBeyondTheBodyIsRefusedWithoutAllocating) {
  for (const char* size : {"ffffffffffffffff", "10000000000000000", "fffff", "-1", "", "0x10"}) {
    std::string body = std::string(size) + ";chunk-signature=" + kAwsChunk1 + "\r\n" + std::string(16, 'a') + "\r\n";
    ExpectRefused(DecodeAwsChunked(body, AwsHeaders(), AwsCaller()), "IncompleteBody", size);
  }
}

TEST(AwsChunked, BytesAfterTheEndAreRefused) {
  ExpectRefused(DecodeAwsChunked(AwsBody() + "x", AwsHeaders(), AwsCaller()), "IncompleteBody");
}

TEST(AwsChunked, APlainBodyIsNotDecoded) {
  VerifiedCaller caller = AwsCaller();
  caller.payload_mode = PayloadMode::kUnsigned;
  ExpectRefused(DecodeAwsChunked(AwsBody(), AwsHeaders(), caller), "InvalidRequest");
}

// --- Chunks signed here, the way the SDKs sign them, to reorder them and add trailers ---------------

std::string SignChunk(const VerifiedCaller& c, const std::string& previous, std::string_view data) {
  return ToHex(HmacSha256(c.signing_key, "AWS4-HMAC-SHA256-PAYLOAD\n" + c.amz_date + "\n" + c.scope + "\n" +
                                             previous + "\n" + Sha256Hex("") + "\n" + Sha256Hex(data)));
}

std::string SignTrailer(const VerifiedCaller& c, const std::string& previous, std::string_view lines) {
  return ToHex(HmacSha256(c.signing_key, "AWS4-HMAC-SHA256-TRAILER\n" + c.amz_date + "\n" + c.scope + "\n" +
                                             previous + "\n" + Sha256Hex(lines)));
}

struct Encoded {
  std::vector<std::string> chunks;  // each "<size>;chunk-signature=<sig>\r\n<data>\r\n"
  std::string final_chunk;          // "0;chunk-signature=<sig>\r\n"
  std::string last_signature;
};

Encoded SignedChunks(const VerifiedCaller& c, const std::vector<std::string>& pieces) {
  Encoded e;
  std::string previous = c.seed_signature;
  for (const auto& p : pieces) {
    previous = SignChunk(c, previous, p);
    char size[20];
    std::snprintf(size, sizeof size, "%zx", p.size());
    e.chunks.push_back(std::string(size) + ";chunk-signature=" + previous + "\r\n" + p + "\r\n");
  }
  previous = SignChunk(c, previous, "");
  e.final_chunk = "0;chunk-signature=" + previous + "\r\n";
  e.last_signature = previous;
  return e;
}

HeaderList Declared(size_t n, const std::string& trailer = "") {
  HeaderList h = {{"x-amz-decoded-content-length", std::to_string(n)}};
  if (!trailer.empty()) h.emplace_back("X-Amz-Trailer", trailer);
  return h;
}

TEST(AwsChunked, ReorderedChunksAreRefused) {
  VerifiedCaller c = AwsCaller();
  Encoded e = SignedChunks(c, {"first-chunk", "secnd-chunk", "third-chunk"});
  std::string in_order = e.chunks[0] + e.chunks[1] + e.chunks[2] + e.final_chunk + "\r\n";
  auto ok = DecodeAwsChunked(in_order, Declared(33), c);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "first-chunksecnd-chunkthird-chunk");
  std::string swapped = e.chunks[1] + e.chunks[0] + e.chunks[2] + e.final_chunk + "\r\n";
  ExpectRefused(DecodeAwsChunked(swapped, Declared(33), c), "SignatureDoesNotMatch");
  std::string dropped = e.chunks[0] + e.chunks[2] + e.final_chunk + "\r\n";
  ExpectRefused(DecodeAwsChunked(dropped, Declared(22), c), "SignatureDoesNotMatch");
}

VerifiedCaller SignedTrailerCaller() {
  VerifiedCaller c = AwsCaller();
  c.payload_mode = PayloadMode::kStreamingSignedTrailer;
  return c;
}

std::string WithSignedTrailer(const VerifiedCaller& c, const Encoded& e, const std::string& lines) {
  std::string body;
  for (const auto& chunk : e.chunks) body += chunk;
  body += e.final_chunk;
  std::string canonical;  // each "name:value\n"
  for (const auto& line : Split(lines, '\n'))
    if (!line.empty()) canonical += line + "\n";
  for (const auto& line : Split(lines, '\n'))
    if (!line.empty()) body += line + "\r\n";
  body += "x-amz-trailer-signature:" + SignTrailer(c, e.last_signature, canonical) + "\r\n\r\n";
  return body;
}

TEST(AwsChunked, DecodesASignedTrailerAndChecksItsChecksum) {
  VerifiedCaller c = SignedTrailerCaller();
  Encoded e = SignedChunks(c, {"hello world, hello world, ", "hello world, "});
  const std::string good = "x-amz-checksum-crc32:naOIow==";  // botocore's CRC32 of the 39 bytes
  auto plain = DecodeAwsChunked(WithSignedTrailer(c, e, good), Declared(39, "x-amz-checksum-crc32"), c);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, std::string("hello world, hello world, hello world, "));
  // A wrong checksum, signed correctly: the body is not what the client hashed.
  ExpectRefused(DecodeAwsChunked(WithSignedTrailer(c, e, "x-amz-checksum-crc32:AAAAAA=="),
                                 Declared(39, "x-amz-checksum-crc32"), c),
                "BadDigest");
}

TEST(AwsChunked, ATamperedSignedTrailerIsRefused) {
  VerifiedCaller c = SignedTrailerCaller();
  Encoded e = SignedChunks(c, {"hello world, hello world, hello world, "});
  std::string body = WithSignedTrailer(c, e, "x-amz-checksum-crc32:naOIow==");
  std::string changed = body;
  changed.replace(changed.find("naOIow=="), 8, "naOIox==");
  auto got = DecodeAwsChunked(changed, Declared(39, "x-amz-checksum-crc32"), c);
  ExpectRefused(got, "SignatureDoesNotMatch");
  EXPECT_THAT(got.status().message(), HasSubstr("trailer"));
  std::string unsigned_trailer = body.substr(0, body.find("x-amz-trailer-signature")) + "\r\n";
  ExpectRefused(DecodeAwsChunked(unsigned_trailer, Declared(39, "x-amz-checksum-crc32"), c), "MalformedTrailerError");
}

// botocore's AwsChunkedWrapper (chunk_size=16) over "hello world, " * 3 with a CRC32 trailer: what
// boto3 sends for STREAMING-UNSIGNED-PAYLOAD-TRAILER.
constexpr char kBotoUnsignedTrailer[] =
    "10\r\nhello world, hel\r\n10\r\nlo world, hello \r\n7\r\nworld, \r\n0\r\nx-amz-checksum-crc32:naOIow==\r\n\r\n";
constexpr char kBotoSha256Trailer[] =
    "10\r\nhello world, hel\r\n10\r\nlo world, hello \r\n7\r\nworld, \r\n0\r\n"
    "x-amz-checksum-sha256:NWjnUn+I/i0ijbaWYd/NtPcXW15BTYz5X36MuBepn5Y=\r\n\r\n";

VerifiedCaller UnsignedTrailerCaller() {
  VerifiedCaller c;
  c.payload_mode = PayloadMode::kStreamingUnsignedTrailer;
  return c;
}

TEST(AwsChunked, DecodesBotocoresUnsignedTrailerForm) {
  auto plain = DecodeAwsChunked(kBotoUnsignedTrailer, Declared(39, "x-amz-checksum-crc32"), UnsignedTrailerCaller());
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, "hello world, hello world, hello world, ");
  auto sha = DecodeAwsChunked(kBotoSha256Trailer, Declared(39, "x-amz-checksum-sha256"), UnsignedTrailerCaller());
  ASSERT_TRUE(sha.ok()) << sha.status().message();
}

TEST(AwsChunked, UnsignedChunksReorderedFailTheirChecksum) {
  std::string body = kBotoUnsignedTrailer;
  std::string a = "10\r\nhello world, hel\r\n", b = "10\r\nlo world, hello \r\n";
  body.replace(0, a.size() + b.size(), b + a);
  ExpectRefused(DecodeAwsChunked(body, Declared(39, "x-amz-checksum-crc32"), UnsignedTrailerCaller()), "BadDigest");
}

TEST(AwsChunked, TheTrailerMustBeTheOneXAmzTrailerNames) {
  // missing
  std::string no_trailer = "10\r\nhello world, hel\r\n10\r\nlo world, hello \r\n7\r\nworld, \r\n0\r\n\r\n";
  ExpectRefused(DecodeAwsChunked(no_trailer, Declared(39, "x-amz-checksum-crc32"), UnsignedTrailerCaller()),
                "MalformedTrailerError");
  // another checksum than the one announced
  ExpectRefused(DecodeAwsChunked(kBotoSha256Trailer, Declared(39, "x-amz-checksum-crc32"), UnsignedTrailerCaller()),
                "MalformedTrailerError");
  // no x-amz-trailer at all, or one naming no checksum
  ExpectRefused(DecodeAwsChunked(kBotoUnsignedTrailer, Declared(39), UnsignedTrailerCaller()), "InvalidRequest");
  ExpectRefused(DecodeAwsChunked(kBotoUnsignedTrailer, Declared(39, "x-amz-meta-a"), UnsignedTrailerCaller()),
                "InvalidRequest");
  // a trailer on a body whose mode announces none
  VerifiedCaller signed_only = AwsCaller();
  Encoded e = SignedChunks(signed_only, {"abc"});
  ExpectRefused(DecodeAwsChunked(e.chunks[0] + e.final_chunk + "x-amz-checksum-crc32:naOIow==\r\n\r\n", Declared(3),
                                 signed_only),
                "MalformedTrailerError");
}

TEST(AwsChunked, SizeLiesInTheUnsignedFormAreRefused) {
  // a chunk announcing 17 bytes over 16
  std::string longer = std::string(kBotoUnsignedTrailer);
  longer.replace(0, 2, "11");
  ExpectRefused(DecodeAwsChunked(longer, Declared(39, "x-amz-checksum-crc32"), UnsignedTrailerCaller()), "IncompleteBody");
  std::string shorter = std::string(kBotoUnsignedTrailer);
  shorter.replace(0, 2, "0f");
  ExpectRefused(DecodeAwsChunked(shorter, Declared(39, "x-amz-checksum-crc32"), UnsignedTrailerCaller()), "IncompleteBody");
  ExpectRefused(DecodeAwsChunked(kBotoUnsignedTrailer, Declared(40, "x-amz-checksum-crc32"), UnsignedTrailerCaller()),
                "IncompleteBody");
  ExpectRefused(DecodeAwsChunked(kBotoUnsignedTrailer, Declared(38, "x-amz-checksum-crc32"), UnsignedTrailerCaller()),
                "IncompleteBody");
}

// --- Checksums beside a plain body -------------------------------------------------------------------

TEST(PayloadChecksums, KnownValuesOfEveryAlgorithm) {
  EXPECT_EQ(ChecksumBase64("crc32", "hello"), "NhCmhg==");     // botocore's PutObject above
  EXPECT_EQ(ChecksumBase64("crc32c", "123456789"), "4waSgw==");  // the CRC-32C check value e3069283
  EXPECT_EQ(ChecksumBase64("crc64nvme", "123456789"), "rosUhgp5mIg=");  // CRC-64/NVME check ae8b14860a799888
  EXPECT_EQ(ChecksumBase64("sha1", "hello world, hello world, hello world, "), "o/uV8e9g8aufwwBspZqiLouRV9s=");
  EXPECT_EQ(ChecksumBase64("sha256", "hello world, hello world, hello world, "),
            "NWjnUn+I/i0ijbaWYd/NtPcXW15BTYz5X36MuBepn5Y=");
  EXPECT_EQ(ChecksumBase64("md4", "x"), "");
}

// CRC32 is computed a word at a time (zlib), so its known values are pinned where that matters: the
// check value, the empty body, and a body of 1 MiB + 12 bytes starting off an 8-byte boundary
// (a leading and a trailing partial word around the long middle); the last value is Python's
// binascii.crc32 of the same bytes.
TEST(PayloadChecksums, Crc32MatchesTheStandardOnEveryLengthAndAlignment) {
  EXPECT_EQ(ChecksumBase64("crc32", "123456789"), "y/Q5Jg==");  // the CRC-32 check value cbf43926
  EXPECT_EQ(ChecksumBase64("crc32", ""), "AAAAAA==");
  std::string bytes((1 << 20) + 13, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7 + 3) & 0xff);
  const std::string_view body = std::string_view(bytes).substr(1);
  EXPECT_EQ(ChecksumBase64("crc32", body), "2sEtmA==");
  EXPECT_TRUE(CheckPayloadChecksums(body, {{"x-amz-checksum-crc32", "2sEtmA=="}}).ok());
  std::string flipped(body);
  flipped[flipped.size() / 2] ^= 0x01;
  EXPECT_THAT(CheckPayloadChecksums(flipped, {{"x-amz-checksum-crc32", "2sEtmA=="}}).message(),
              StartsWith("BadDigest: "));
}

TEST(PayloadChecksums, MatchingHeadersPass) {
  EXPECT_TRUE(CheckPayloadChecksums("hello", {{"Content-MD5", "XUFAKrxLKna5cZ2REBfFkg=="},
                                              {"x-amz-checksum-crc32", "NhCmhg=="}}).ok());
  EXPECT_TRUE(CheckPayloadChecksums("123456789", {{"X-Amz-Checksum-CRC32C", "4waSgw=="}}).ok());
  EXPECT_TRUE(CheckPayloadChecksums("hello", {{"x-amz-checksum-mode", "ENABLED"}}).ok());
  EXPECT_TRUE(CheckPayloadChecksums("hello", {}).ok());
}

TEST(PayloadChecksums, AWrongContentMd5IsBadDigestAndAMalformedOneInvalidDigest) {
  Status bad = CheckPayloadChecksums("hellO", {{"Content-MD5", "XUFAKrxLKna5cZ2REBfFkg=="}});
  EXPECT_THAT(bad.message(), StartsWith("BadDigest: "));
  for (const char* malformed : {"XUFAKrxLKna5cZ2REBfF", "not base64!", "", "aGVsbG8="}) {
    Status st = CheckPayloadChecksums("hello", {{"Content-MD5", malformed}});
    EXPECT_THAT(st.message(), StartsWith("InvalidDigest: ")) << malformed;
  }
}

TEST(PayloadChecksums, AWrongChecksumIsBadDigestAndAMalformedOneInvalidRequest) {
  Status bad = CheckPayloadChecksums("hellO", {{"x-amz-checksum-crc32", "NhCmhg=="}});
  EXPECT_THAT(bad.message(), StartsWith("BadDigest: "));
  EXPECT_THAT(bad.message(), HasSubstr("CRC32"));
  Status malformed = CheckPayloadChecksums("hello", {{"x-amz-checksum-sha256", "NhCmhg=="}});
  EXPECT_THAT(malformed.message(), StartsWith("InvalidRequest: "));
  EXPECT_THAT(malformed.message(), HasSubstr("x-amz-checksum-sha256"));
  Status two = CheckPayloadChecksums("hello", {{"x-amz-checksum-crc32", "NhCmhg=="}, {"x-amz-checksum-sha1", "AAAA"}});
  EXPECT_THAT(two.message(), StartsWith("InvalidRequest: Expecting a single x-amz-checksum- header"));
}

}  // namespace
}  // namespace ty::api
