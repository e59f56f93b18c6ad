#include "cli/client.h"

#include <httplib.h>
#include <openssl/x509.h>

#include <filesystem>

#include "api/server.h"
#include "api/sigv4.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/strings.h"

namespace ty::cli {

using nlohmann::json;

struct Client::Impl {
  std::string endpoint;
  std::string host_header;
  std::unique_ptr<httplib::Client> http;
  api::Credential cred;
  std::string region;
};

namespace {

// What went wrong in words, with the endpoint and what to check: httplib's own names ("Connection",
// "Read") say neither.
Status Unreachable(httplib::Error error, const std::string& endpoint) {
  using E = httplib::Error;
  switch (error) {
    case E::SSLServerVerification:
      return Unavailable("the TLS certificate of " + endpoint + " is not trusted: pass its certificate (or the CA that "
                         "signed it) with --ca-bundle or AWS_CA_BUNDLE, or --data-dir for the server's own "
                         "self-signed one");
    case E::Connection:
      return Unavailable("cannot reach the server at " + endpoint +
                         ": the connection was refused or the host is unreachable (is `trainyard serve` running "
                         "there? --endpoint-url or TRAINYARD_ENDPOINT_URL names another)");
    case E::ConnectionTimeout:
      return Unavailable("cannot reach the server at " + endpoint + ": connecting timed out");
    case E::Read:
      return Unavailable("the server at " + endpoint + " closed the connection or sent no answer in time");
    case E::Write:
      return Unavailable("the request could not be sent to the server at " + endpoint + " (the connection closed)");
    case E::SSLConnection:
      return Unavailable("no TLS connection with " + endpoint + " (is it an http:// endpoint?)");
    case E::BindIPAddress:
      return Unavailable("cannot reach the server at " + endpoint + " (" + httplib::to_string(error) + " failed)");
    default:
      return Unavailable("cannot reach the server at " + endpoint + ": " + httplib::to_string(error) + " error");
  }
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions opts) {
  auto impl = std::make_unique<Impl>();
  if (opts.endpoint.empty()) {
    const char* e = std::getenv("TRAINYARD_ENDPOINT_URL");
    opts.endpoint = e && *e ? e : "http://127.0.0.1:8080";
  }
  const bool https = StartsWith(opts.endpoint, "https://");
  if (!https && !StartsWith(opts.endpoint, "http://"))
    return InvalidArgument("--endpoint-url must start with http:// or https:// (got '" + opts.endpoint + "')");
  std::string hostport = opts.endpoint.substr(https ? 8 : 7);
  while (EndsWith(hostport, "/")) hostport.pop_back();
  impl->host_header = hostport;
  impl->endpoint = opts.endpoint;
  if (opts.data_dir.empty()) {
    const char* d = std::getenv("TRAINYARD_DATA_DIR");
    opts.data_dir = d && *d ? d : "trainyard-data";
  }
  impl->http = std::make_unique<httplib::Client>(opts.endpoint);
  if (https) {
    if (opts.ca_bundle.empty()) {
      const char* b = std::getenv("AWS_CA_BUNDLE");
      if (b && *b) opts.ca_bundle = b;
    }
    if (!opts.ca_bundle.empty()) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(opts.ca_bundle, ec))
        return InvalidArgument("the CA bundle " + opts.ca_bundle + " (--ca-bundle or AWS_CA_BUNDLE) is not a file");
      impl->http->set_ca_cert_path(opts.ca_bundle);
    } else if (std::string own = opts.data_dir + "/tls/certificate.pem"; std::filesystem::exists(own)) {
      // The server's own self-signed certificate is trusted as its credentials file is: whoever
      // can read the data directory runs the server.
      X509_STORE* store = X509_STORE_new();
      if (!store || X509_STORE_set_default_paths(store) != 1 || X509_STORE_load_file(store, own.c_str()) != 1) {
        if (store) X509_STORE_free(store);
        return InvalidArgument("cannot read the server's certificate " + own);
      }
      impl->http->set_ca_cert_store(store);  // the client owns it from here
    }
    impl->http->enable_server_certificate_verification(true);
  }
  impl->http->set_keep_alive(true);
  impl->http->set_tcp_nodelay(true);
  impl->http->set_read_timeout(120, 0);
  if (opts.region.empty()) {
    const char* r = std::getenv("AWS_REGION");
    if (!r || !*r) r = std::getenv("AWS_DEFAULT_REGION");
    opts.region = r && *r ? r : "us-east-1";
  }
  impl->region = opts.region;
  const char* id = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  if (id && secret && *id && *secret) {
    impl->cred = {id, secret};
  } else {
    auto c = ReadCredentialsFile(opts.data_dir + "/credentials", "trainyard");
    if (!c.ok())
      return NotFound("no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or point --data-dir at the "
                      "server's data directory (" + c.status().message() + ")");
    impl->cred = {c->first, c->second};
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

StatusOr<std::string> Client::GetText(const std::string& path) {
  auto res = impl_->http->Get(path);
  if (!res) return Unreachable(res.error(), impl_->endpoint);
  if (res->status != 200) return Unavailable("GET " + path + " answered " + std::to_string(res->status));
  return res->body;
}

StatusOr<std::pair<int, std::string>> Client::GetAny(const std::string& path, const std::string& bearer) {
  httplib::Headers headers;
  if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
  auto res = impl_->http->Get(path, headers);
  if (!res) return Unreachable(res.error(), impl_->endpoint);
  return std::make_pair(res->status, res->body);
}

StatusOr<json> Client::Post(const std::string& service, const std::string& path, const json& body,
                            const std::string& target) {
  const std::string payload = body.dump();
  api::HttpRequestView req;
  req.method = "POST";
  req.path = path;
  req.body = payload;
  std::string content_type = target.empty() ? "application/json" : "application/x-amz-json-1.1";
  req.headers = {{"host", impl_->host_header}, {"content-type", content_type}};
  if (!target.empty()) req.headers.emplace_back("x-amz-target", target);
  api::SignSigV4(req, impl_->cred, impl_->region, service, SystemClock::instance().now_ms());
  httplib::Headers headers;
  for (const auto& [k, v] : req.headers)
    if (ToLower(k) != "host" && ToLower(k) != "content-type") headers.emplace(k, v);
  auto res = impl_->http->Post(path, headers, payload, content_type);
  if (!res) return Unreachable(res.error(), impl_->endpoint);
  json out = json::parse(res->body.empty() ? "{}" : res->body, nullptr, false);
  if (res->status != 200) {
    std::string type = res->get_header_value("x-amzn-ErrorType");
    std::string message = out.is_object() ? out.value("message", res->body) : res->body;
    if (type.empty() && out.is_object()) type = out.value("__type", "Error");
    return Status(res->status == 403 ? Code::kBadSignature : Code::kInvalidArgument, type + ": " + message);
  }
  if (out.is_discarded()) return Internal("the server answered with something that is not JSON");
  return out;
}

StatusOr<json> Client::Call(const std::string& service, const std::string& operation, const json& body) {
  if (service == "batch") return Post("batch", "/v1/" + ToLower(operation), body);
  if (service == "sagemaker") return Post("sagemaker", "/", body, "SageMaker." + operation);
  if (service == "trainyard") {
    const std::string path = api::OwnOperationPath(operation);
    if (path.empty()) return InvalidArgument("trainyard has no operation " + operation.substr(0, 64));
    return Post("sagemaker", path, body);
  }
  return InvalidArgument("service must be batch, sagemaker or trainyard, not '" + service + "'");
}

}  // namespace ty::cli
