// S3 request bodies beyond the signature: the aws-chunked encoding (chunks signed one after another
// from the request's signature, an optional trailer carrying a checksum) and the checksums a client
// may send beside a plain body (Content-MD5, x-amz-checksum-*).
//
// aws-chunked, signed (x-amz-content-sha256 STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]):
//   <hex size>;chunk-signature=<sig>\r\n<data>\r\n ... 0;chunk-signature=<sig>\r\n
//   [<name>:<value>\r\n ... x-amz-trailer-signature:<sig>\r\n] \r\n
// where chunk i's signature is hex HMAC-SHA256(signing key, "AWS4-HMAC-SHA256-PAYLOAD\n" date "\n"
// scope "\n" <previous signature> "\n" sha256("") "\n" sha256(data)), the first previous signature
// being the request's own, and the trailer's is over "AWS4-HMAC-SHA256-TRAILER\n" date "\n" scope
// "\n" <final chunk's signature> "\n" sha256("<name>:<value>\n" ...).
// aws-chunked, unsigned (STREAMING-UNSIGNED-PAYLOAD-TRAILER):
//   <hex size>\r\n<data>\r\n ... 0\r\n[<name>:<value>\r\n ...]\r\n
//
// Errors: every failure is a Status whose message starts with S3's error code and a colon, then a
// sentence naming the field and the rule (as objstore/bucket_store.h): SignatureDoesNotMatch
// (kBadSignature), IncompleteBody, MissingContentLength, MalformedTrailerError, InvalidRequest,
// InvalidDigest and BadDigest (kInvalidArgument). None throws; nothing reads past its input.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/sigv4.h"
#include "core/status.h"

namespace ty::api {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Decodes an aws-chunked `body` sent under `caller` (its payload_mode must be one of the streaming
// modes; its signing key, date, scope and seed signature verify the chunks). From the request's
// `headers`: x-amz-decoded-content-length (required: MissingContentLength) must equal the decoded
// size (IncompleteBody), and x-amz-trailer names the trailer the body must end with (a checksum
// header, x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256}), whose value must match the decoded
// bytes (BadDigest). The chunk sizes are bounded by the input: a size that could not be there is
// IncompleteBody, never an allocation. Returns the plain bytes.
StatusOr<std::string> DecodeAwsChunked(std::string_view body, const HeaderList& headers,
                                       const VerifiedCaller& caller);

// Checks a plain (decoded) body against the Content-MD5 and x-amz-checksum-* headers it was sent
// with: a value that is not base64 of the right length is InvalidDigest (Content-MD5) or
// InvalidRequest (x-amz-checksum-*), a mismatch BadDigest, more than one x-amz-checksum-* header
// InvalidRequest. Headers the request does not carry are not checked.
Status CheckPayloadChecksums(std::string_view body, const HeaderList& headers);

// The base64 of `body`'s checksum `algorithm` ("crc32", "crc32c", "crc64nvme", "sha1", "sha256",
// lower case; big-endian bytes for the CRCs, as S3 sends them), or "" for another name.
std::string ChecksumBase64(std::string_view algorithm, std::string_view body);

}  // namespace ty::api
