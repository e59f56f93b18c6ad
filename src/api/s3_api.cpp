#include "api/s3_api.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <iomanip>
#include <locale>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "api/audit.h"
#include "api/aws_chunked.h"
#include "api/errors.h"
#include "api/forward.h"
#include "control/controller.h"
#include "core/config.h"
#include "core/strings.h"
#include "http/server.h"
#include "objstore/bucket_store.h"

namespace ty::api {

std::string VirtualHostBucket(const http::Request& req, const S3Config& config) {
  std::string host;
  if (const std::string* h = req.Header("Host")) host = ToLower(*h);
  if (size_t colon = host.rfind(':'); colon != std::string::npos && host.find(']') == std::string::npos)
    host.resize(colon);
  for (const std::string& domain : config.virtual_host_domains) {
    const std::string suffix = "." + ToLower(domain);
    if (host.size() > suffix.size() && EndsWith(host, suffix)) return host.substr(0, host.size() - suffix.size());
  }
  return "";
}

namespace {

using objstore::ObjectAttributes;
using objstore::ObjectMeta;

constexpr const char* kXmlns = "http://s3.amazonaws.com/doc/2006-03-01/";
// Request documents (CompleteMultipartUpload, DeleteObjects, CreateBucketConfiguration) larger
// than this are refused before parsing: 1000 keys of 1024 bytes, escaped, fit well within it.
constexpr size_t kMaxXmlBodyBytes = 4 * 1024 * 1024;
constexpr int kMaxXmlDepth = 8;   // the documents S3 reads are three levels deep
constexpr int kMaxDeleteKeys = 1000;
constexpr int kMaxListKeys = 1000;
// GetObject answers bodies up to this size from memory, and streams larger ones in pieces of
// kStreamPieceBytes (so a 5 GiB object never sits in memory whole).
constexpr int64_t kInlineBodyBytes = 1024 * 1024;
constexpr int64_t kStreamPieceBytes = 1024 * 1024;

// Subresources S3 has and this server does not serve: a request naming one is 501 NotImplemented.
constexpr const char* kUnservedSubresources[] = {
    "accelerate", "acl", "analytics", "attributes", "cors", "encryption", "intelligent-tiering", "inventory",
    "legal-hold", "lifecycle", "logging", "metrics", "notification", "object-lock", "ownershipControls", "policy",
    "policyStatus", "publicAccessBlock", "replication", "requestPayment", "restore", "retention", "select",
    "tagging", "torrent", "versioning", "versions", "website", "uploadPartCopy"};

Status S3Error(const std::string& code, const std::string& message) { return InvalidArgument(code + ": " + message); }

// ---- text helpers ----

// encoding-type=url: every byte but the unreserved ones and '/' as %XX (botocore unquotes it).
std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// %XX decoded once; false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexDigitValue(in[i + 1]), lo = HexDigitValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string Quoted(const std::string& etag) { return "\"" + etag + "\""; }

// ---- a small XML writer ----

class Xml {
 public:
  explicit Xml(const std::string& root) : root_(root) {
    out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<" + root + " xmlns=\"" + kXmlns + "\">";
  }
  Xml& Open(const char* name) {
    out_ += "<" + std::string(name) + ">";
    return *this;
  }
  Xml& Close(const char* name) {
    out_ += "</" + std::string(name) + ">";
    return *this;
  }
  Xml& Leaf(const char* name, std::string_view text) {
    out_ += "<" + std::string(name) + ">" + XmlEscape(text) + "</" + name + ">";
    return *this;
  }
  Xml& Leaf(const char* name, int64_t n) { return Leaf(name, std::to_string(n)); }
  Xml& Bool(const char* name, bool b) { return Leaf(name, b ? "true" : "false"); }
  std::string Done() { return out_ + "</" + root_ + ">"; }

 private:
  std::string root_;
  std::string out_;
};

// ---- request documents, read with libxml2 (only here) ----

struct XmlNode {
  std::string name;  // local name, namespace dropped
  std::string text;  // the text directly inside it
  std::vector<XmlNode> children;

  const XmlNode* Child(std::string_view n) const {
    for (const auto& c : children)
      if (c.name == n) return &c;
    return nullptr;
  }
};

bool Convert(xmlNode* node, int depth, XmlNode* out) {
  if (depth > kMaxXmlDepth) return false;
  out->name = reinterpret_cast<const char*>(node->name);
  for (xmlNode* c = node->children; c; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      out->children.emplace_back();
      if (!Convert(c, depth + 1, &out->children.back())) return false;
    } else if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) {
      if (c->content) out->text += reinterpret_cast<const char*>(c->content);
    } else if (c->type == XML_ENTITY_REF_NODE) {
      return false;  // no entities: nothing is substituted, nothing is fetched
    }
  }
  return true;
}

StatusOr<XmlNode> ParseXml(std::string_view body, const char* root) {
  const Status malformed =
      S3Error("MalformedXML", std::string("The XML you provided was not well-formed or did not validate against our "
                                          "published schema (expected a ") + root + " document)");
  if (body.size() > kMaxXmlBodyBytes)
    return S3Error("MalformedXML", "The " + std::string(root) + " document is over " + std::to_string(kMaxXmlBodyBytes) +
                                       " bytes");
  xmlDoc* doc = xmlReadMemory(body.data(), static_cast<int>(body.size()), "request.xml", nullptr,
                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (!doc) return malformed;
  XmlNode out;
  xmlNode* top = xmlDocGetRootElement(doc);
  // A document type declaration is how entities come in: none is accepted.
  bool ok = top && !doc->intSubset && Convert(top, 1, &out) && out.name == root;
  xmlFreeDoc(doc);
  if (!ok) return malformed;
  return out;
}

// ---- addressing ----

struct Address {
  std::string bucket;  // "" : the service (ListBuckets)
  std::string key;     // "" : the bucket
  bool has_key = false;
};

StatusOr<Address> AddressOf(const http::Request& req, const S3Config& config) {
  Address a;
  std::string_view path = req.path;
  const std::string virtual_bucket = VirtualHostBucket(req, config);
  if (path.empty() || path.front() != '/') return S3Error("InvalidArgument", "The request path must start with '/'");
  path.remove_prefix(1);
  std::string raw_bucket, raw_key;
  if (!virtual_bucket.empty()) {
    a.bucket = virtual_bucket;
    raw_key = std::string(path);
    a.has_key = !raw_key.empty();
  } else {
    size_t slash = path.find('/');
    raw_bucket = std::string(path.substr(0, slash));
    if (slash != std::string_view::npos && slash + 1 < path.size()) {
      raw_key = std::string(path.substr(slash + 1));
      a.has_key = true;
    }
    if (!PercentDecode(raw_bucket, &a.bucket))
      return S3Error("InvalidBucketName", "The bucket name in the path has a malformed percent escape");
  }
  if (a.has_key && !PercentDecode(raw_key, &a.key))
    return S3Error("InvalidArgument", "The object key in the path has a malformed percent escape");
  return a;
}

std::string ParamOr(const http::Request& req, std::string_view name, std::string fallback = "") {
  auto v = req.Params(name);
  return v.empty() ? fallback : v.front();
}

bool HasParam(const http::Request& req, std::string_view name) { return !req.Params(name).empty(); }

std::string HeaderOr(const http::Request& req, std::string_view name, std::string fallback = "") {
  const std::string* h = req.Header(name);
  return h ? *h : fallback;
}

// The operation a request is, from its method, address and subresources; NotImplemented or
// MethodNotAllowed when it is none this server serves.
StatusOr<std::string> OperationOf(const http::Request& req, const Address& a) {
  for (const char* sub : kUnservedSubresources)
    if (HasParam(req, sub))
      return S3Error("NotImplemented", std::string("The '") + sub + "' subresource is not implemented by this server");
  const std::string& m = req.method;
  auto not_allowed = [&]() -> Status {
    return S3Error("MethodNotAllowed", "The specified method " + m + " is not allowed against this resource");
  };
  if (a.bucket.empty()) {
    if (m == "GET") return std::string("ListBuckets");
    return not_allowed();
  }
  if (!a.has_key) {
    if (m == "PUT") return std::string("CreateBucket");
    if (m == "HEAD") return std::string("HeadBucket");
    if (m == "DELETE") return std::string("DeleteBucket");
    if (m == "GET") {
      if (HasParam(req, "location")) return std::string("GetBucketLocation");
      if (HasParam(req, "uploads")) return std::string("ListMultipartUploads");
      if (ParamOr(req, "list-type") == "2") return std::string("ListObjectsV2");
      return std::string("ListObjects");
    }
    if (m == "POST" && HasParam(req, "delete")) return std::string("DeleteObjects");
    return not_allowed();
  }
  const bool upload_id = HasParam(req, "uploadId");
  if (m == "PUT") {
    if (HasParam(req, "partNumber") || upload_id) {
      if (req.Header("x-amz-copy-source"))
        return S3Error("NotImplemented", "UploadPartCopy (x-amz-copy-source on a part) is not implemented by this server");
      return std::string("UploadPart");
    }
    return std::string(req.Header("x-amz-copy-source") ? "CopyObject" : "PutObject");
  }
  if (m == "GET") return std::string(upload_id ? "ListParts" : "GetObject");
  if (m == "HEAD") return std::string("HeadObject");
  if (m == "DELETE") return std::string(upload_id ? "AbortMultipartUpload" : "DeleteObject");
  if (m == "POST") {
    if (HasParam(req, "uploads")) return std::string("CreateMultipartUpload");
    if (upload_id) return std::string("CompleteMultipartUpload");
  }
  return not_allowed();
}

// The attributes a PutObject / CreateMultipartUpload / CopyObject (REPLACE) sets.
ObjectAttributes AttributesOf(const http::Request& req) {
  ObjectAttributes a;
  if (const std::string* ct = req.Header("Content-Type")) a.content_type = *ct;
  static const char* kStored[] = {"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language",
                                  "Expires"};
  for (const char* name : kStored) {
    const std::string* v = req.Header(name);
    if (!v) continue;
    std::string value = *v;
    if (std::string_view(name) == "Content-Encoding") {
      // aws-chunked describes this request's framing, not the object.
      std::string kept;
      for (const std::string& part : Split(value, ',')) {
        std::string t(Trim(part));
        if (t.empty() || EqualsIgnoreCase(t, "aws-chunked")) continue;
        kept += (kept.empty() ? "" : ",") + t;
      }
      value = kept;
      if (value.empty()) continue;
    }
    a.headers.emplace_back(name, value);
  }
  for (const auto& [name, value] : req.headers)
    if (name.size() > 11 && StartsWith(ToLower(name), "x-amz-meta-")) a.user_metadata.emplace_back(ToLower(name.substr(11)), value);
  return a;
}

void AddObjectHeaders(const ObjectMeta& meta, http::Response* res) {
  res->headers.emplace_back("ETag", Quoted(meta.etag));
  res->headers.emplace_back("Last-Modified", FormatHttpDate(meta.last_modified_ms));
  res->headers.emplace_back("Accept-Ranges", "bytes");
  res->headers.emplace_back("Content-Type",
                            meta.attributes.content_type.empty() ? "binary/octet-stream" : meta.attributes.content_type);
  for (const auto& [name, value] : meta.attributes.headers) res->headers.emplace_back(name, value);
  for (const auto& [name, value] : meta.attributes.user_metadata) res->headers.emplace_back("x-amz-meta-" + name, value);
}

// GetObject's response-* query parameters (a presigned URL's way of choosing how a browser saves
// the object): each replaces the header it names. They are part of the signed request.
void ApplyResponseOverrides(const http::Request& req, http::Response* res) {
  static constexpr std::pair<std::string_view, std::string_view> kOverrides[] = {
      {"response-content-type", "Content-Type"},         {"response-content-language", "Content-Language"},
      {"response-expires", "Expires"},                   {"response-cache-control", "Cache-Control"},
      {"response-content-disposition", "Content-Disposition"}, {"response-content-encoding", "Content-Encoding"}};
  for (const auto& override : kOverrides) {
    auto value = req.Params(override.first);
    if (value.empty()) continue;
    const std::string_view header = override.second;  // a lambda may not capture a structured binding (C++20)
    std::erase_if(res->headers, [&](const auto& h) { return EqualsIgnoreCase(h.first, header); });
    res->headers.emplace_back(std::string(header), value.front());
  }
}

// A Range header's first range resolved against `size`: [first, last]; nullopt when there is no
// usable Range (absent, or not bytes=); an unsatisfiable one is InvalidRange.
StatusOr<std::optional<std::pair<int64_t, int64_t>>> RangeOf(const http::Request& req, int64_t size) {
  const std::string* h = req.Header("Range");
  using Result = std::optional<std::pair<int64_t, int64_t>>;
  if (!h || !StartsWith(*h, "bytes=")) return Result();
  std::string spec(Trim(std::string_view(*h).substr(6)));
  if (spec.find(',') != std::string::npos) return Result();  // several ranges: the whole object, as S3 does
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return Result();
  auto first = ParseInt(spec.substr(0, dash));
  auto last = ParseInt(spec.substr(dash + 1));
  const Status unsatisfiable = S3Error("InvalidRange", "The requested range " + spec + " is not satisfiable for an object of " +
                                                           std::to_string(size) + " bytes");
  if (dash == 0) {  // bytes=-n: the last n bytes
    if (!last || *last < 0) return Result();
    if (*last == 0 || size == 0) return unsatisfiable;
    return Result(std::pair<int64_t, int64_t>{std::max<int64_t>(0, size - *last), size - 1});
  }
  if (!first || *first < 0) return Result();
  if (dash + 1 < spec.size() && (!last || *last < *first)) return Result();  // syntactically invalid: ignored
  if (*first >= size) return unsatisfiable;
  int64_t end = last ? std::min(*last, size - 1) : size - 1;
  return Result(std::pair<int64_t, int64_t>{*first, end});
}

bool EtagListMatches(const std::string& header, const std::string& etag) {
  for (const std::string& part : Split(header, ',')) {
    std::string t(Trim(part));
    if (t == "*") return true;
    if (StartsWith(t, "W/")) t = t.substr(2);
    if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
    if (t == etag) return true;
  }
  return false;
}

// If-Match / If-Unmodified-Since fail -> 412; If-None-Match / If-Modified-Since -> 304 (RFC 9110's
// order: If-Match first, then If-Unmodified-Since unless If-Match was given, and so on).
std::optional<int> Precondition(const http::Request& req, const ObjectMeta& meta) {
  const int64_t modified_s = meta.last_modified_ms / 1000;
  const std::string* if_match = req.Header("If-Match");
  if (if_match && !EtagListMatches(*if_match, meta.etag)) return 412;
  if (!if_match)
    if (const std::string* h = req.Header("If-Unmodified-Since"))
      if (int64_t t = 0; ParseHttpDate(*h, &t) && modified_s > t / 1000) return 412;
  const std::string* if_none = req.Header("If-None-Match");
  if (if_none && EtagListMatches(*if_none, meta.etag)) return 304;
  if (!if_none)
    if (const std::string* h = req.Header("If-Modified-Since"))
      if (int64_t t = 0; ParseHttpDate(*h, &t) && modified_s <= t / 1000) return 304;
  return std::nullopt;
}

std::string BucketArn(const std::string& bucket) { return "arn:aws:s3:::" + bucket; }
std::string ObjectArn(const std::string& bucket, const std::string& key) { return "arn:aws:s3:::" + bucket + "/" + key; }

}  // namespace

std::string ScopeService(const http::Request& req) {
  if (const std::string* auth = req.Header("Authorization"); auth && StartsWith(*auth, "AWS ")) return "s3";  // SigV2: S3 only
  if (!req.Header("Authorization") && req.Params("X-Amz-Credential").empty())
    return !req.Params("AWSAccessKeyId").empty() && !req.Params("Signature").empty() ? "s3" : "";  // presigned SigV2
  std::vector<std::string> parts = CredentialScope(req);
  return parts.empty() ? "" : parts[3];
}

bool S3Endpoint::IsUpload(const http::Request& head) const {
  if (head.method != "PUT" || head.Header("x-amz-copy-source")) return false;
  auto a = AddressOf(head, controller_.config().s3);
  return a.ok() && a->has_key;
}

namespace {

// One request on its way through: its address, its caller and its audit record.
struct Call {
  const Authorizer& authz;
  objstore::BucketStore& store;
  const Config& config;
  const http::Request& req;
  Address address;
  std::string operation;
  AuditedCall audit;
  Principal caller;
  VerifiedCaller verified;
  CallContext context;

  Call(control::Controller& c, const Authorizer& a, objstore::BucketStore& s, const http::Request& r,
       const std::string& op)
      : authz(a), store(s), config(c.config()), req(r), operation(op), audit(c, r, Protocol::kS3RestXml, "s3", op) {}

  const std::string& bucket() const { return address.bucket; }
  const std::string& key() const { return address.key; }

  // `action` on `resource`; a refusal's deciding statement goes into the audit record.
  Status Allow(const std::string& action, const std::string& resource,
               const std::vector<std::pair<std::string, std::string>>& keys = {}) {
    std::vector<AccessDecision> decisions;
    Status st = authz.CheckS3(caller, context, action, resource, keys, caller.is_root() ? nullptr : &decisions);
    if (!st.ok() && !decisions.empty() && !decisions.back().statement.empty())
      audit.record().deciding_statement = decisions.back().policy + "/" + decisions.back().statement;
    return st;
  }

  http::Response Xml(std::string body, int status = 200) {
    http::Response res;
    res.status = status;
    res.headers = {{"Content-Type", "application/xml"}, {"x-amz-request-id", audit.request_id()}};
    res.body = std::move(body);
    return res;
  }

  http::Response Empty(int status = 200) {
    http::Response res;
    res.status = status;
    res.headers = {{"x-amz-request-id", audit.request_id()}};
    return res;
  }
};


// ---- buckets ----

StatusOr<http::Response> ListBuckets(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:ListAllMyBuckets", "*"));
  auto buckets = c.store.ListBuckets();
  if (!buckets.ok()) return buckets.status();
  Xml x("ListAllMyBucketsResult");
  x.Open("Owner").Leaf("ID", c.config.account_id).Leaf("DisplayName", c.config.account_id).Close("Owner");
  x.Open("Buckets");
  for (const auto& b : *buckets)
    x.Open("Bucket").Leaf("Name", b.name).Leaf("CreationDate", FormatIso8601(b.created_ms)).Close("Bucket");
  x.Close("Buckets");
  return c.Xml(x.Done());
}

StatusOr<http::Response> CreateBucket(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:CreateBucket", BucketArn(c.bucket())));
  if (!Trim(c.req.body).empty()) {
    auto doc = ParseXml(c.req.body, "CreateBucketConfiguration");
    if (!doc.ok()) return doc.status();
    const XmlNode* loc = doc->Child("LocationConstraint");
    const std::string wanted = loc ? std::string(Trim(loc->text)) : "";
    if (!wanted.empty() && wanted != c.config.region)
      return S3Error("IllegalLocationConstraintException",
                     "The LocationConstraint '" + wanted + "' is not this server's region (" + c.config.region + ")");
  }
  TY_RETURN_IF_ERROR(c.store.CreateBucket(c.bucket()));
  http::Response res = c.Empty();
  res.headers.emplace_back("Location", "/" + c.bucket());
  return res;
}

StatusOr<http::Response> HeadBucket(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:ListBucket", BucketArn(c.bucket())));
  TY_RETURN_IF_ERROR(c.store.HeadBucket(c.bucket()));
  http::Response res = c.Empty();
  res.headers.emplace_back("x-amz-bucket-region", c.config.region);
  return res;
}

StatusOr<http::Response> DeleteBucket(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:DeleteBucket", BucketArn(c.bucket())));
  TY_RETURN_IF_ERROR(c.store.DeleteBucket(c.bucket()));
  return c.Empty(204);
}

StatusOr<http::Response> GetBucketLocation(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:GetBucketLocation", BucketArn(c.bucket())));
  TY_RETURN_IF_ERROR(c.store.HeadBucket(c.bucket()));
  // As S3 answers: no constraint for us-east-1, the region's name otherwise.
  std::string body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint xmlns=\"" + std::string(kXmlns) +
                     "\">" + (c.config.region == "us-east-1" ? "" : XmlEscape(c.config.region)) + "</LocationConstraint>";
  return c.Xml(std::move(body));
}

// ---- listing ----

StatusOr<int> MaxKeysOf(const http::Request& req, const char* param) {
  auto v = req.Params(param);
  if (v.empty()) return kMaxListKeys;
  auto n = ParseInt(v.front());
  if (!n || *n < 0)
    return S3Error("InvalidArgument", std::string(param) + " must be an integer between 0 and 2147483647, not '" +
                                          v.front() + "'");
  return static_cast<int>(std::min<int64_t>(*n, kMaxListKeys));
}

// ListObjectsV2 (v2 = true) and ListObjects.
StatusOr<http::Response> ListObjects(Call& c, bool v2) {
  objstore::ListQuery q;
  q.prefix = ParamOr(c.req, "prefix");
  q.delimiter = ParamOr(c.req, "delimiter");
  auto max_keys = MaxKeysOf(c.req, "max-keys");
  if (!max_keys.ok()) return max_keys.status();
  q.max_keys = *max_keys;
  const std::string encoding = ParamOr(c.req, "encoding-type");
  if (!encoding.empty() && encoding != "url")
    return S3Error("InvalidArgument", "encoding-type must be 'url', not '" + encoding + "'");
  const bool url = encoding == "url";
  auto enc = [&](const std::string& s) { return url ? UrlEncode(s) : s; };
  const std::string token = ParamOr(c.req, "continuation-token");
  const std::string start_after = ParamOr(c.req, "start-after");
  const std::string marker = ParamOr(c.req, "marker");
  if (v2 && HasParam(c.req, "continuation-token")) {
    auto last = Base64Decode(token, 8192);
    if (!last) return S3Error("InvalidArgument", "The continuation token provided is incorrect");
    q.start_after = *last;
  } else {
    q.start_after = v2 ? start_after : marker;
  }
  TY_RETURN_IF_ERROR(c.Allow("s3:ListBucket", BucketArn(c.bucket()),
                             {{"s3:prefix", q.prefix}, {"s3:delimiter", q.delimiter}, {"s3:max-keys", std::to_string(q.max_keys)}}));
  auto page = c.store.ListObjects(c.bucket(), q);
  if (!page.ok()) return page.status();
  Xml x("ListBucketResult");
  x.Leaf("Name", c.bucket()).Leaf("Prefix", enc(q.prefix));
  if (v2) {
    if (HasParam(c.req, "continuation-token")) x.Leaf("ContinuationToken", token);
    if (!start_after.empty()) x.Leaf("StartAfter", enc(start_after));
  } else {
    x.Leaf("Marker", enc(marker));
  }
  if (!q.delimiter.empty()) x.Leaf("Delimiter", enc(q.delimiter));
  x.Leaf("MaxKeys", q.max_keys);
  if (url) x.Leaf("EncodingType", "url");
  x.Bool("IsTruncated", page->truncated);
  if (v2) {
    x.Leaf("KeyCount", static_cast<int64_t>(page->objects.size() + page->common_prefixes.size()));
    if (page->truncated) x.Leaf("NextContinuationToken", Base64Encode(page->last));
  } else if (page->truncated) {
    x.Leaf("NextMarker", enc(page->last));
  }
  const bool owner = !v2 || ParamOr(c.req, "fetch-owner") == "true";
  for (const ObjectMeta& o : page->objects) {
    x.Open("Contents").Leaf("Key", enc(o.key)).Leaf("LastModified", FormatIso8601(o.last_modified_ms));
    x.Leaf("ETag", Quoted(o.etag)).Leaf("Size", o.size).Leaf("StorageClass", "STANDARD");
    if (owner) x.Open("Owner").Leaf("ID", c.config.account_id).Leaf("DisplayName", c.config.account_id).Close("Owner");
    x.Close("Contents");
  }
  for (const std::string& p : page->common_prefixes) x.Open("CommonPrefixes").Leaf("Prefix", enc(p)).Close("CommonPrefixes");
  return c.Xml(x.Done());
}

// ---- objects ----

// The body of an upload as the client meant it: an aws-chunked body decoded (each chunk's
// signature and the trailer's checksum checked), and the plain bytes checked against Content-MD5
// and x-amz-checksum-* (api/aws_chunked.h). `storage` holds a decoded body.
StatusOr<std::string_view> PayloadOf(Call& c, std::string* storage) {
  std::string_view body = c.req.body;
  if (c.verified.payload_mode != PayloadMode::kSignedBody && c.verified.payload_mode != PayloadMode::kUnsigned) {
    auto decoded = DecodeAwsChunked(c.req.body, c.req.headers, c.verified);
    if (!decoded.ok()) return decoded.status();
    *storage = std::move(*decoded);
    body = *storage;
  }
  TY_RETURN_IF_ERROR(CheckPayloadChecksums(body, c.req.headers));
  return body;
}

StatusOr<http::Response> PutObject(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:PutObject", ObjectArn(c.bucket(), c.key())));
  std::string decoded;
  auto body = PayloadOf(c, &decoded);
  if (!body.ok()) return body.status();
  // PayloadOf checked Content-MD5: the store computes the ETag's MD5 as it writes, not twice.
  auto meta = c.store.PutObject(c.bucket(), c.key(), *body, AttributesOf(c.req));
  if (!meta.ok()) return meta.status();
  http::Response res = c.Empty();
  res.headers.emplace_back("ETag", Quoted(meta->etag));
  return res;
}

StatusOr<http::Response> GetObject(Call& c, bool head) {
  TY_RETURN_IF_ERROR(c.Allow("s3:GetObject", ObjectArn(c.bucket(), c.key())));
  auto reader = c.store.OpenObject(c.bucket(), c.key());
  if (!reader.ok()) return reader.status();
  const ObjectMeta& meta = (*reader)->meta();
  if (std::optional<int> failed = Precondition(c.req, meta)) {
    if (*failed == 412) return S3Error("PreconditionFailed", "At least one of the preconditions you specified did not hold");
    http::Response res = c.Empty(304);
    res.headers.emplace_back("ETag", Quoted(meta.etag));
    res.headers.emplace_back("Last-Modified", FormatHttpDate(meta.last_modified_ms));
    return res;
  }
  auto range = RangeOf(c.req, meta.size);
  if (!range.ok()) return range.status();
  http::Response res = c.Empty();
  AddObjectHeaders(meta, &res);
  ApplyResponseOverrides(c.req, &res);
  int64_t first = 0, count = meta.size;
  if (*range) {
    first = (*range)->first;
    count = (*range)->second - first + 1;
    res.status = 206;
    res.headers.emplace_back("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string((*range)->second) +
                                                  "/" + std::to_string(meta.size));
  }
  res.content_length = count;
  if (head) return res;
  if (count <= kInlineBodyBytes) {
    while (static_cast<int64_t>(res.body.size()) < count) {
      const int64_t at = first + static_cast<int64_t>(res.body.size());
      auto n = (*reader)->ReadAt(at, static_cast<size_t>(count) - res.body.size(), &res.body);
      if (!n.ok()) return n.status();
      if (*n == 0) return Internal("InternalError: s3://" + c.bucket() + "/" + c.key() + " ended before its recorded size");
    }
    res.content_length = -1;
    return res;
  }
  // Larger objects are read a piece at a time from the file opened above (a concurrent overwrite
  // does not change what this reader sends). A read that fails or ends early ends the stream
  // short: the listener closes the connection and the client sees a truncated body, never a
  // wrong one.
  struct Cursor {
    std::unique_ptr<objstore::ObjectReader> reader;
    int64_t at;
    int64_t end;
  };
  auto cursor = std::make_shared<Cursor>(Cursor{std::move(*reader), first, first + count});
  res.stream = [cursor](std::string* out) {
    if (cursor->at >= cursor->end) return false;
    const size_t want = static_cast<size_t>(std::min<int64_t>(kStreamPieceBytes, cursor->end - cursor->at));
    auto n = cursor->reader->ReadAt(cursor->at, want, out);
    if (!n.ok() || *n == 0) return false;
    cursor->at += static_cast<int64_t>(*n);
    return true;
  };
  return res;
}

StatusOr<http::Response> DeleteObject(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:DeleteObject", ObjectArn(c.bucket(), c.key())));
  TY_RETURN_IF_ERROR(c.store.DeleteObject(c.bucket(), c.key()));
  return c.Empty(204);
}

StatusOr<http::Response> DeleteObjects(Call& c) {
  TY_RETURN_IF_ERROR(CheckPayloadChecksums(c.req.body, c.req.headers));
  auto doc = ParseXml(c.req.body, "Delete");
  if (!doc.ok()) return doc.status();
  bool quiet = false;
  if (const XmlNode* q = doc->Child("Quiet")) quiet = EqualsIgnoreCase(Trim(q->text), "true");
  std::vector<std::string> keys;
  for (const XmlNode& o : doc->children) {
    if (o.name != "Object") continue;
    const XmlNode* k = o.Child("Key");
    if (!k) return S3Error("MalformedXML", "Each Object in a Delete document must have a Key");
    keys.push_back(k->text);
  }
  if (keys.empty()) return S3Error("MalformedXML", "A Delete document must name at least one Object");
  if (keys.size() > kMaxDeleteKeys)
    return S3Error("MalformedXML", "A Delete document names at most " + std::to_string(kMaxDeleteKeys) + " objects, not " +
                                       std::to_string(keys.size()));
  TY_RETURN_IF_ERROR(c.store.HeadBucket(c.bucket()));
  Xml x("DeleteResult");
  for (const std::string& key : keys) {
    Status st = c.Allow("s3:DeleteObject", ObjectArn(c.bucket(), key));
    if (st.ok()) st = c.store.DeleteObject(c.bucket(), key);
    if (st.ok()) {
      if (!quiet) x.Open("Deleted").Leaf("Key", key).Close("Deleted");
      continue;
    }
    WireError e = ToWireError(Protocol::kS3RestXml, st);
    x.Open("Error").Leaf("Key", key).Leaf("Code", e.type).Leaf("Message", e.message).Close("Error");
  }
  return c.Xml(x.Done());
}

StatusOr<http::Response> CopyObject(Call& c) {
  std::string source = HeaderOr(c.req, "x-amz-copy-source");
  if (size_t q = source.find('?'); q != std::string::npos) {
    const std::string params = source.substr(q + 1);
    source.resize(q);
    if (params != "versionId=null")
      return S3Error("NotImplemented", "x-amz-copy-source names a version (" + params +
                                           "); this server keeps no object versions");
  }
  std::string decoded;
  if (!PercentDecode(source, &decoded)) return S3Error("InvalidArgument", "x-amz-copy-source has a malformed percent escape");
  if (!decoded.empty() && decoded.front() == '/') decoded.erase(0, 1);
  size_t slash = decoded.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == decoded.size())
    return S3Error("InvalidArgument", "x-amz-copy-source must be bucket/key, URL-encoded");
  const std::string src_bucket = decoded.substr(0, slash), src_key = decoded.substr(slash + 1);
  const std::string directive = ToUpper(HeaderOr(c.req, "x-amz-metadata-directive", "COPY"));
  if (directive != "COPY" && directive != "REPLACE")
    return S3Error("InvalidArgument", "x-amz-metadata-directive must be COPY or REPLACE, not '" + directive + "'");
  if (src_bucket == c.bucket() && src_key == c.key() && directive == "COPY")
    return S3Error("InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without "
                                     "changing the object's metadata (x-amz-metadata-directive: REPLACE)");
  TY_RETURN_IF_ERROR(c.Allow("s3:GetObject", ObjectArn(src_bucket, src_key)));
  TY_RETURN_IF_ERROR(c.Allow("s3:PutObject", ObjectArn(c.bucket(), c.key())));
  std::optional<ObjectAttributes> replace;
  if (directive == "REPLACE") replace = AttributesOf(c.req);
  auto meta = c.store.CopyObject(src_bucket, src_key, c.bucket(), c.key(), replace);
  if (!meta.ok()) return meta.status();
  Xml x("CopyObjectResult");
  x.Leaf("LastModified", FormatIso8601(meta->last_modified_ms)).Leaf("ETag", Quoted(meta->etag));
  return c.Xml(x.Done());
}

// ---- multipart ----

// Whose quota an upload's parts count against ([s3] max_incomplete_upload_bytes_per_user): the
// user, or for a role session the role (arn:aws:iam::ACCOUNT:role/ROLE), so that sessions of one
// role, which any job may open, share one quota.
std::string QuotaHolder(const Principal& caller) {
  constexpr std::string_view kSession = ":assumed-role/";
  const size_t at = caller.arn.find(kSession);
  if (caller.type != Principal::Type::kRoleSession || !StartsWith(caller.arn, "arn:aws:sts::") || at == std::string::npos)
    return caller.arn;
  const std::string account = caller.arn.substr(13, at - 13);
  const std::string rest = caller.arn.substr(at + kSession.size());
  return "arn:aws:iam::" + account + ":role/" + rest.substr(0, rest.find('/'));
}

StatusOr<http::Response> CreateMultipartUpload(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:PutObject", ObjectArn(c.bucket(), c.key())));
  auto id = c.store.CreateMultipartUpload(c.bucket(), c.key(), AttributesOf(c.req), QuotaHolder(c.caller));
  if (!id.ok()) return id.status();
  Xml x("InitiateMultipartUploadResult");
  x.Leaf("Bucket", c.bucket()).Leaf("Key", c.key()).Leaf("UploadId", *id);
  return c.Xml(x.Done());
}

StatusOr<http::Response> UploadPart(Call& c) {
  const std::string number = ParamOr(c.req, "partNumber");
  auto n = ParseInt(number);
  if (!n || *n < 1 || *n > 10000)
    return S3Error("InvalidArgument", "partNumber must be an integer between 1 and 10000, not '" + number + "'");
  if (!HasParam(c.req, "uploadId")) return S3Error("InvalidArgument", "UploadPart needs the uploadId query parameter");
  TY_RETURN_IF_ERROR(c.Allow("s3:PutObject", ObjectArn(c.bucket(), c.key())));
  std::string decoded;
  auto body = PayloadOf(c, &decoded);
  if (!body.ok()) return body.status();
  auto etag = c.store.UploadPart(c.bucket(), c.key(), ParamOr(c.req, "uploadId"), static_cast<int>(*n), *body);
  if (!etag.ok()) return etag.status();
  http::Response res = c.Empty();
  res.headers.emplace_back("ETag", Quoted(*etag));
  return res;
}

StatusOr<http::Response> ListParts(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:ListMultipartUploadParts", ObjectArn(c.bucket(), c.key())));
  auto max_parts = MaxKeysOf(c.req, "max-parts");
  if (!max_parts.ok()) return max_parts.status();
  auto marker = ParseInt(ParamOr(c.req, "part-number-marker", "0"));
  if (!marker || *marker < 0) return S3Error("InvalidArgument", "part-number-marker must be a non-negative integer");
  const std::string upload_id = ParamOr(c.req, "uploadId");
  auto parts = c.store.ListParts(c.bucket(), c.key(), upload_id);
  if (!parts.ok()) return parts.status();
  Xml x("ListPartsResult");
  x.Leaf("Bucket", c.bucket()).Leaf("Key", c.key()).Leaf("UploadId", upload_id).Leaf("PartNumberMarker", *marker);
  int shown = 0;
  int64_t last = 0;
  bool truncated = false;
  for (const auto& p : *parts) {
    if (p.part_number <= *marker) continue;
    if (shown == *max_parts) {
      truncated = true;
      break;
    }
    ++shown;
    last = p.part_number;
  }
  x.Leaf("NextPartNumberMarker", last).Leaf("MaxParts", *max_parts).Bool("IsTruncated", truncated);
  shown = 0;
  for (const auto& p : *parts) {
    if (p.part_number <= *marker) continue;
    if (shown++ == *max_parts) break;
    x.Open("Part").Leaf("PartNumber", p.part_number).Leaf("LastModified", FormatIso8601(p.last_modified_ms));
    x.Leaf("ETag", Quoted(p.etag)).Leaf("Size", p.size).Close("Part");
  }
  x.Leaf("StorageClass", "STANDARD");
  return c.Xml(x.Done());
}

StatusOr<http::Response> CompleteMultipartUpload(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:PutObject", ObjectArn(c.bucket(), c.key())));
  auto doc = ParseXml(c.req.body, "CompleteMultipartUpload");
  if (!doc.ok()) return doc.status();
  std::vector<std::pair<int, std::string>> parts;
  for (const XmlNode& p : doc->children) {
    if (p.name != "Part") continue;
    const XmlNode* number = p.Child("PartNumber");
    const XmlNode* etag = p.Child("ETag");
    auto n = number ? ParseInt(Trim(number->text)) : std::nullopt;
    if (!n || !etag || *n < 1 || *n > 10000)
      return S3Error("MalformedXML", "Each Part of CompleteMultipartUpload needs a PartNumber (1 to 10000) and an ETag");
    parts.emplace_back(static_cast<int>(*n), std::string(Trim(etag->text)));
  }
  if (parts.empty()) return S3Error("MalformedXML", "CompleteMultipartUpload must name at least one Part");
  auto meta = c.store.CompleteMultipartUpload(c.bucket(), c.key(), ParamOr(c.req, "uploadId"), parts);
  if (!meta.ok()) return meta.status();
  Xml x("CompleteMultipartUploadResult");
  x.Leaf("Location", "/" + c.bucket() + "/" + c.key()).Leaf("Bucket", c.bucket()).Leaf("Key", c.key());
  x.Leaf("ETag", Quoted(meta->etag));
  return c.Xml(x.Done());
}

StatusOr<http::Response> AbortMultipartUpload(Call& c) {
  TY_RETURN_IF_ERROR(c.Allow("s3:AbortMultipartUpload", ObjectArn(c.bucket(), c.key())));
  TY_RETURN_IF_ERROR(c.store.AbortMultipartUpload(c.bucket(), c.key(), ParamOr(c.req, "uploadId")));
  return c.Empty(204);
}

StatusOr<http::Response> ListMultipartUploads(Call& c) {
  objstore::UploadQuery q;
  q.prefix = ParamOr(c.req, "prefix");
  q.delimiter = ParamOr(c.req, "delimiter");
  q.key_marker = ParamOr(c.req, "key-marker");
  q.upload_id_marker = ParamOr(c.req, "upload-id-marker");
  if (q.key_marker.empty()) q.upload_id_marker.clear();  // S3 ignores it without a key-marker
  // 1 to 1000; a larger number gets 1000, as S3 answers.
  const std::string max_uploads = ParamOr(c.req, "max-uploads", "1000");
  auto n = ParseInt(max_uploads);
  if (!n || *n < 1)
    return S3Error("InvalidArgument", "max-uploads must be an integer between 1 and 1000, not '" + max_uploads + "'");
  q.max_uploads = static_cast<int>(std::min<int64_t>(*n, kMaxListKeys));
  const std::string encoding = ParamOr(c.req, "encoding-type");
  if (!encoding.empty() && encoding != "url")
    return S3Error("InvalidArgument", "encoding-type must be 'url', not '" + encoding + "'");
  const bool url = encoding == "url";
  auto enc = [&](const std::string& s) { return url ? UrlEncode(s) : s; };
  TY_RETURN_IF_ERROR(c.Allow("s3:ListBucketMultipartUploads", BucketArn(c.bucket())));
  auto page = c.store.ListMultipartUploads(c.bucket(), q);
  if (!page.ok()) return page.status();
  Xml x("ListMultipartUploadsResult");
  x.Leaf("Bucket", c.bucket()).Leaf("KeyMarker", enc(q.key_marker)).Leaf("UploadIdMarker", q.upload_id_marker);
  if (page->truncated)
    x.Leaf("NextKeyMarker", enc(page->next_key_marker)).Leaf("NextUploadIdMarker", page->next_upload_id_marker);
  x.Leaf("Prefix", enc(q.prefix));
  if (!q.delimiter.empty()) x.Leaf("Delimiter", enc(q.delimiter));
  x.Leaf("MaxUploads", q.max_uploads).Bool("IsTruncated", page->truncated);
  if (url) x.Leaf("EncodingType", "url");
  for (const auto& u : page->uploads) {
    x.Open("Upload").Leaf("Key", enc(u.key)).Leaf("UploadId", u.upload_id);
    if (!u.initiator.empty()) x.Open("Initiator").Leaf("ID", u.initiator).Leaf("DisplayName", u.initiator).Close("Initiator");
    x.Leaf("Initiated", FormatIso8601(u.initiated_ms)).Leaf("StorageClass", "STANDARD").Close("Upload");
  }
  for (const std::string& p : page->common_prefixes)
    x.Open("CommonPrefixes").Leaf("Prefix", enc(p)).Close("CommonPrefixes");
  return c.Xml(x.Done());
}

// S3's operation table: an operation is served when it has a row. Each handler checks its own
// s3: action (an operation may check two, or one per object it names) and writes its XML.
struct S3Operation {
  std::string_view name;
  StatusOr<http::Response> (*serve)(Call& c);
  // Recorded in the audit trail whatever its outcome; the others only when refused for the
  // caller's credentials or permissions (object traffic would flood the trail).
  bool always_audited = false;
};
constexpr S3Operation kS3Operations[] = {
    {"ListBuckets", ListBuckets},
    {"CreateBucket", CreateBucket, true},
    {"HeadBucket", HeadBucket},
    {"DeleteBucket", DeleteBucket, true},
    {"GetBucketLocation", GetBucketLocation},
    {"ListObjectsV2", [](Call& c) { return ListObjects(c, /*v2=*/true); }},
    {"ListObjects", [](Call& c) { return ListObjects(c, /*v2=*/false); }},
    {"PutObject", PutObject},
    {"GetObject", [](Call& c) { return GetObject(c, /*head=*/false); }},
    {"HeadObject", [](Call& c) { return GetObject(c, /*head=*/true); }},
    {"DeleteObject", DeleteObject},
    {"DeleteObjects", DeleteObjects},
    {"CopyObject", CopyObject},
    {"CreateMultipartUpload", CreateMultipartUpload},
    {"UploadPart", UploadPart},
    {"ListParts", ListParts},
    {"CompleteMultipartUpload", CompleteMultipartUpload},
    {"AbortMultipartUpload", AbortMultipartUpload},
    {"ListMultipartUploads", ListMultipartUploads},
};

const S3Operation* FindS3Operation(std::string_view name) {
  for (const S3Operation& row : kS3Operations)
    if (row.name == name) return &row;
  return nullptr;
}

}  // namespace

S3Endpoint::S3Endpoint(control::Controller& controller, const Authorizer& authz,
                       std::unique_ptr<objstore::BucketStore> store, Authenticator authenticate)
    : controller_(controller), authz_(authz), store_(std::move(store)), authenticate_(std::move(authenticate)) {}

S3Endpoint::~S3Endpoint() = default;

namespace {

http::Response ErrorResponse(const http::Request& req, const Status& st, const std::string& request_id) {
  WireError e = ToWireError(Protocol::kS3RestXml, st);
  http::Response res;
  res.status = e.http_status;
  res.headers = {{"x-amz-request-id", request_id}};
  if (req.method == "HEAD" || e.http_status == 304) return res;
  res.headers.emplace_back("Content-Type", "application/xml");
  res.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + XmlEscape(e.type) + "</Code><Message>" +
             XmlEscape(e.message) + "</Message><Resource>" + XmlEscape(req.path) + "</Resource><RequestId>" +
             XmlEscape(request_id) + "</RequestId></Error>";
  return res;
}

}  // namespace

http::Response S3ErrorResponse(const http::Request& req, const Status& st, const std::string& request_id) {
  return ErrorResponse(req, st, request_id);
}

http::Response S3Endpoint::Handle(const http::Request& req) {
  const S3Config& config = controller_.config().s3;
  if (!config.enabled)
    return ErrorResponse(req,
                         S3Error("NotImplemented", "The S3 endpoint is turned off on this server ([s3] enabled = false)"),
                         NewUuid());
  auto address = AddressOf(req, config);
  StatusOr<std::string> operation = address.ok() ? OperationOf(req, *address) : StatusOr<std::string>(address.status());
  Call call(controller_, authz_, *store_, req, operation.ok() ? *operation : std::string("Unknown"));
  auto caller = authenticate_(req, &call.audit.record(), &call.verified);
  const S3Operation* row = FindS3Operation(call.operation);
  auto finish = [&](const Status& outcome, http::Response res) {
    if ((row && row->always_audited) || IsDenied(ToWireError(Protocol::kS3RestXml, outcome).type)) call.audit.Finish(outcome);
    return res;
  };
  if (!caller.ok()) return finish(caller.status(), ErrorResponse(req, caller.status(), call.audit.request_id()));
  if (!operation.ok()) return ErrorResponse(req, operation.status(), call.audit.request_id());
  call.address = std::move(*address);
  call.caller = std::move(*caller);
  call.context = {req.peer, req.secure_transport, controller_.Now()};
  ApplyPeerOrigin(req, &call.context.source_ip, &call.context.secure_transport);  // forwarded: the client's
  if (!call.bucket().empty()) {
    call.audit.record().resources.push_back({"AWS::S3::Bucket", call.bucket()});
    if (call.address.has_key) call.audit.record().resources.push_back({"AWS::S3::Object", call.bucket() + "/" + call.key()});
  }
  StatusOr<http::Response> out =
      row ? row->serve(call) : StatusOr<http::Response>(S3Error("NotImplemented", call.operation + " is not implemented by this server"));
  if (!out.ok()) {
    if (objstore::S3Code(out.status()) == "InternalError" && out.status().code() == Code::kInternal)
      spdlog::error("s3 {}: {}", call.operation, out.status().message());
    return finish(out.status(), ErrorResponse(req, out.status(), call.audit.request_id()));
  }
  return finish(Status::Ok(), std::move(*out));
}

}  // namespace ty::api
