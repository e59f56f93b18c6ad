// The S3-compatible client: libcurl for HTTP with its SigV4 signing, libxml2 for the XML
// replies. Built into the trainyard-s3 module (s3_module.cpp) so that a process that never
// talks to an endpoint, such as the supervisor of a job with embedded buckets, does not load
// libcurl and the ~30 libraries behind it; see objstore.h, LoadS3Store.
#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <utility>

#include "core/object_key.h"
#include "core/strings.h"
#include "objstore/names.h"
#include "objstore/objstore.h"

namespace ty::objstore {

namespace fs = std::filesystem;

namespace {

// ------------------------------------------------------------------------------------------
// XML replies (libxml2: a real parser for entities, namespaces and CDATA, and a tree walk).

struct Xml {
  xmlDocPtr doc = nullptr;
  explicit Xml(const std::string& text) {
    if (!text.empty())
      doc = xmlReadMemory(text.data(), static_cast<int>(text.size()), "reply.xml", nullptr,
                          XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  }
  ~Xml() {
    if (doc) xmlFreeDoc(doc);
  }
  xmlNodePtr Root() const { return doc ? xmlDocGetRootElement(doc) : nullptr; }
};

bool Named(xmlNodePtr n, const char* name) {
  return n && n->type == XML_ELEMENT_NODE && std::strcmp(reinterpret_cast<const char*>(n->name), name) == 0;
}

std::string Text(xmlNodePtr n) {
  if (!n) return "";
  xmlChar* c = xmlNodeGetContent(n);
  std::string s = c ? reinterpret_cast<const char*>(c) : "";
  if (c) xmlFree(c);
  return s;
}

xmlNodePtr Child(xmlNodePtr n, const char* name) {
  for (xmlNodePtr c = n ? n->children : nullptr; c; c = c->next)
    if (Named(c, name)) return c;
  return nullptr;
}

std::string Unquote(std::string etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// RFC 3986 unreserved characters stay; everything else is %XX (upper case, as SigV4 wants).
std::string Encode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// The S3 client.

struct Response {
  long code = 0;
  std::string body;
  std::string etag;     // ETag response header
  int64_t length = -1;  // Content-Length response header
  std::string curl_error;
};

size_t WriteString(char* p, size_t size, size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(p, size * n);
  return size * n;
}
// A download's body goes to the file on success and to the error text otherwise.
struct FileSink {
  CURL* handle = nullptr;
  FILE* file = nullptr;
  std::string* error_body = nullptr;
  int write_errno = 0;  // why the last write to the file failed (ENOSPC: the disk is full)
};
size_t WriteFile(char* p, size_t size, size_t n, void* ud) {
  auto* s = static_cast<FileSink*>(ud);
  long code = 0;
  curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300) {
    s->error_body->append(p, size * n);
    return size * n;
  }
  size_t written = std::fwrite(p, 1, size * n, s->file);
  if (written != size * n) s->write_errno = errno ? errno : EIO;
  return written;
}

struct ReadSource {
  FILE* f = nullptr;
  int64_t left = 0;  // bytes still to send
};
size_t ReadFileCb(char* p, size_t size, size_t n, void* ud) {
  auto* src = static_cast<ReadSource*>(ud);
  size_t want = std::min<int64_t>(static_cast<int64_t>(size * n), src->left);
  if (want == 0) return 0;
  size_t got = std::fread(p, 1, want, src->f);
  src->left -= static_cast<int64_t>(got);
  return got;
}

size_t HeaderCb(char* p, size_t size, size_t n, void* ud) {
  auto* r = static_cast<Response*>(ud);
  std::string line(p, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    if (name == "etag") r->etag = Unquote(value);
    if (name == "content-length") r->length = std::atoll(value.c_str());
  }
  return size * n;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
  });
}

class S3Store : public ObjectStore {
 public:
  explicit S3Store(const ObjectStoreConfig& c) : c_(c) {
    GlobalInit();
    while (!c_.endpoint.empty() && c_.endpoint.back() == '/') c_.endpoint.pop_back();
  }

  StatusOr<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix) override {
    std::vector<ObjectInfo> out;
    std::string token;
    for (int page = 0;; ++page) {
      // Query parameters in sorted order: SigV4 signs the canonical (sorted) query string.
      std::string q;
      if (!token.empty()) q += "continuation-token=" + Encode(token, false) + "&";
      // A '/' in the prefix stays as it is: that is how S3 clients send it and how servers
      // canonicalize it (a %2F here fails the signature check).
      q += "list-type=2&prefix=" + Encode(prefix, true);
      Response r;
      Request req{"GET", bucket, "", q};
      req.to_string = &r.body;
      TY_RETURN_IF_ERROR(Perform(req, &r));
      if (r.code != 200) return Error("ListObjectsV2", bucket, prefix, r);
      Xml xml(r.body);
      xmlNodePtr root = xml.Root();
      if (!Named(root, "ListBucketResult"))
        return Internal("ListObjectsV2 " + Where(bucket, prefix) + ": the reply is not a ListBucketResult");
      for (xmlNodePtr c = root->children; c; c = c->next) {
        if (!Named(c, "Contents")) continue;
        ObjectInfo o;
        o.key = Text(Child(c, "Key"));
        o.size = std::atoll(Text(Child(c, "Size")).c_str());
        o.etag = Unquote(Text(Child(c, "ETag")));
        out.push_back(o);
      }
      bool truncated = Text(Child(root, "IsTruncated")) == "true";
      token = Text(Child(root, "NextContinuationToken"));
      if (!truncated) break;
      if (token.empty())
        return Internal("ListObjectsV2 " + Where(bucket, prefix) + ": a truncated page without NextContinuationToken");
    }
    return out;
  }

  StatusOr<ObjectInfo> Head(const std::string& bucket, const std::string& key) override {
    Response r;
    Request req{"HEAD", bucket, key, ""};
    TY_RETURN_IF_ERROR(Perform(req, &r));
    if (r.code != 200) return Error("HeadObject", bucket, key, r);
    return ObjectInfo{key, r.length, r.etag};
  }

  Status Get(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    std::error_code ec;
    fs::create_directories(fs::path(local_path).parent_path(), ec);
    std::string tmp = TempName(local_path);
    FILE* f = std::fopen(tmp.c_str(), "wbe");
    if (!f) return Internal("GetObject " + Where(bucket, key) + ": cannot write " + tmp + ": " + std::strerror(errno));
    Response r;
    Request req{"GET", bucket, key, ""};
    int write_errno = 0;
    req.to_file = f;
    req.file_errno = &write_errno;
    Status st = Perform(req, &r);
    errno = 0;
    bool write_ok = std::fclose(f) == 0;
    if (!write_ok && write_errno == 0) write_errno = errno ? errno : EIO;
    // A local write that failed (a full disk, ENOSPC) is said as such, whatever curl made of it.
    if (write_errno != 0 && (!st.ok() || !write_ok))
      st = Internal("GetObject " + Where(bucket, key) + ": cannot write " + tmp + ": " + std::strerror(write_errno));
    if (st.ok() && r.code != 200) st = Error("GetObject", bucket, key, r);
    if (st.ok() && !write_ok) st = Internal("GetObject " + Where(bucket, key) + ": cannot write " + tmp);
    if (st.ok() && r.length >= 0 && static_cast<int64_t>(fs::file_size(tmp, ec)) != r.length)
      st = Internal("GetObject " + Where(bucket, key) + ": short read");
    if (st.ok()) fs::rename(tmp, local_path, ec);
    if (st.ok() && ec) st = Internal("GetObject " + Where(bucket, key) + ": " + ec.message());
    if (!st.ok()) fs::remove(tmp, ec);
    return st;
  }

  Status Put(const std::string& bucket, const std::string& key, const std::string& local_path) override {
    std::error_code ec;
    int64_t size = static_cast<int64_t>(fs::file_size(local_path, ec));
    if (ec) return Internal("PutObject " + Where(bucket, key) + ": cannot read " + local_path + ": " + ec.message());
    if (size >= c_.multipart_threshold_bytes && size > c_.multipart_part_bytes) return PutMultipart(bucket, key, local_path, size);
    FILE* f = std::fopen(local_path.c_str(), "rbe");
    if (!f) return Internal("PutObject " + Where(bucket, key) + ": cannot open " + local_path);
    ReadSource src{f, size};
    Response r;
    Request req{"PUT", bucket, key, ""};
    req.from = &src;
    req.upload_size = size;
    req.to_string = &r.body;
    Status st = Perform(req, &r);
    std::fclose(f);
    TY_RETURN_IF_ERROR(st);
    if (r.code != 200) return Error("PutObject", bucket, key, r);
    return Status::Ok();
  }

  Status Delete(const std::string& bucket, const std::string& key) override {
    Response r;
    Request req{"DELETE", bucket, key, ""};
    req.to_string = &r.body;
    TY_RETURN_IF_ERROR(Perform(req, &r));
    if (r.code != 204 && r.code != 200) return Error("DeleteObject", bucket, key, r);
    return Status::Ok();
  }

  bool Remote(const std::string&) const override { return true; }

 private:
  struct Request {
    std::string method, bucket, key, query;
    std::string* to_string = nullptr;  // response body
    FILE* to_file = nullptr;
    int* file_errno = nullptr;         // set when writing to_file failed (errno)
    ReadSource* from = nullptr;        // request body from a file
    int64_t upload_size = 0;
    const std::string* body = nullptr;  // request body in memory (POST)
  };

  std::string Url(const Request& r) const {
    std::string url;
    std::string path = "/" + Encode(r.key, true);
    if (c_.path_style) {
      url = c_.endpoint + "/" + r.bucket + path;
    } else {
      auto scheme_end = c_.endpoint.find("://");
      url = c_.endpoint.substr(0, scheme_end + 3) + r.bucket + "." + c_.endpoint.substr(scheme_end + 3) + path;
    }
    if (!r.query.empty()) url += "?" + r.query;
    return url;
  }

  Status Perform(const Request& r, Response* out) {
    // The bucket becomes part of the URL (its host name, virtual-host style).
    if (Status st = CheckBucketName(r.bucket); !st.ok()) return InvalidArgument(Where(r.bucket, r.key) + ": " + st.message());
    CURL* h = curl_easy_init();
    if (!h) return Internal("cannot create an HTTP handle");
    std::string url = Url(r);
    std::string sigv4 = "aws:amz:" + c_.region + ":s3";
    std::string userpwd = c_.access_key_id + ":" + c_.secret_access_key;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 120L);
    if (!c_.access_key_id.empty()) {
      curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, HeaderCb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    std::string sink;
    FileSink file_sink{h, r.to_file, &out->body};
    if (r.to_file) {
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteFile);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &file_sink);
    } else {
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteString);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, r.to_string ? r.to_string : &sink);
    }
    // No "Expect:" blanking here: libcurl 7.88 would sign the blanked header it never sends.
    struct curl_slist* headers = nullptr;
    // S3 wants the payload hash in a signed header; libcurl signs the header's value as the
    // payload hash, and bodies are streamed, so they go unsigned (as over TLS is usual).
    if (!c_.access_key_id.empty()) headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (r.method == "HEAD") {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (r.method == "PUT") {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_READFUNCTION, ReadFileCb);
      curl_easy_setopt(h, CURLOPT_READDATA, r.from);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.upload_size));
    } else if (r.method == "POST") {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, r.body ? r.body->c_str() : "");
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body ? r.body->size() : 0));
      headers = curl_slist_append(headers, "Content-Type: application/xml");
    } else if (r.method != "GET") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    if (r.file_errno && file_sink.write_errno) *r.file_errno = file_sink.write_errno;
    if (rc != CURLE_OK)
      return Unavailable(r.method + " " + Where(r.bucket, r.key) + " at " + c_.endpoint + ": " + curl_easy_strerror(rc));
    return Status::Ok();
  }

  // "<op> s3://b/k: <Code>: <Message>" from the error reply (HEAD has no body: the status says).
  static Status Error(const std::string& op, const std::string& bucket, const std::string& key, const Response& r) {
    Xml xml(r.body);
    xmlNodePtr root = xml.Root();
    std::string code = Named(root, "Error") ? Text(Child(root, "Code")) : "";
    std::string message = Named(root, "Error") ? Text(Child(root, "Message")) : "";
    if (code.empty()) {
      code = r.code == 404 ? "NotFound" : r.code == 403 ? "AccessDenied" : "HTTP " + std::to_string(r.code);
    }
    std::string text = op + " " + Where(bucket, key) + ": " + code + (message.empty() ? "" : ": " + message);
    if (r.code == 404) return NotFound(text);
    if (r.code == 403) return FailedPrecondition(text);
    if (r.code >= 500) return Unavailable(text);
    return InvalidArgument(text);
  }

  Status PutMultipart(const std::string& bucket, const std::string& key, const std::string& local_path, int64_t size) {
    Response init;
    Request req{"POST", bucket, key, "uploads="};
    req.to_string = &init.body;
    TY_RETURN_IF_ERROR(Perform(req, &init));
    if (init.code != 200) return Error("CreateMultipartUpload", bucket, key, init);
    Xml xml(init.body);
    std::string upload_id = Text(Child(xml.Root(), "UploadId"));
    if (upload_id.empty()) return Internal("CreateMultipartUpload " + Where(bucket, key) + ": no UploadId in the reply");
    auto abort = [&](Status st) {
      Response r;
      Request a{"DELETE", bucket, key, "uploadId=" + Encode(upload_id, false)};
      a.to_string = &r.body;
      // Best effort: the upload already failed with st; an upload left behind expires on the endpoint.
      (void)Perform(a, &r);
      return st;
    };
    FILE* f = std::fopen(local_path.c_str(), "rbe");
    if (!f) return abort(Internal("UploadPart " + Where(bucket, key) + ": cannot open " + local_path));
    std::string complete = "<CompleteMultipartUpload>";
    int part = 1;
    for (int64_t off = 0; off < size; off += c_.multipart_part_bytes, ++part) {
      int64_t len = std::min(c_.multipart_part_bytes, size - off);
      ReadSource src{f, len};
      Response r;
      Request p{"PUT", bucket, key, "partNumber=" + std::to_string(part) + "&uploadId=" + Encode(upload_id, false)};
      p.from = &src;
      p.upload_size = len;
      p.to_string = &r.body;
      Status st = Perform(p, &r);
      if (st.ok() && r.code != 200) st = Error("UploadPart " + std::to_string(part), bucket, key, r);
      if (st.ok() && r.etag.empty()) st = Internal("UploadPart " + Where(bucket, key) + ": no ETag in the reply");
      if (!st.ok()) {
        std::fclose(f);
        return abort(st);
      }
      complete += "<Part><PartNumber>" + std::to_string(part) + "</PartNumber><ETag>\"" + r.etag + "\"</ETag></Part>";
    }
    std::fclose(f);
    complete += "</CompleteMultipartUpload>";
    Response done;
    Request c{"POST", bucket, key, "uploadId=" + Encode(upload_id, false)};
    c.body = &complete;
    c.to_string = &done.body;
    Status st = Perform(c, &done);
    if (!st.ok()) return abort(st);
    // CompleteMultipartUpload can fail with 200 and an <Error> body.
    Xml reply(done.body);
    if (done.code != 200 || Named(reply.Root(), "Error")) return abort(Error("CompleteMultipartUpload", bucket, key, done));
    return Status::Ok();
  }

  ObjectStoreConfig c_;
};


}  // namespace

std::unique_ptr<ObjectStore> NewS3Store(const ObjectStoreConfig& config) { return std::make_unique<S3Store>(config); }

}  // namespace ty::objstore
