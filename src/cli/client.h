// A signed HTTP client for trainyard's APIs (the CLI's only way to reach the server).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/status.h"

namespace ty::cli {

struct ClientOptions {
  std::string endpoint;   // --endpoint-url, else $TRAINYARD_ENDPOINT_URL, else http://127.0.0.1:8080
  std::string data_dir;   // where to find the credentials file when the AWS variables are unset
  std::string region;     // $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1
  // For https endpoints: the certificates to trust (PEM). --ca-bundle, else $AWS_CA_BUNDLE, else
  // the system's together with the server's self-signed <data_dir>/tls/certificate.pem, if any.
  std::string ca_bundle;
};

class Client {
 public:
  static StatusOr<std::unique_ptr<Client>> Connect(ClientOptions opts);
  ~Client();

  // service: "batch" (operation = Batch operation name) or "sagemaker".
  StatusOr<nlohmann::json> Call(const std::string& service, const std::string& operation, const nlohmann::json& body);
  // POST to a trainyard path, signed as `service`.
  StatusOr<nlohmann::json> Post(const std::string& service, const std::string& path, const nlohmann::json& body,
                                const std::string& target = "");

  // GET of an unsigned path (GET /metrics); the body as text.
  StatusOr<std::string> GetText(const std::string& path);
  // GET of an unsigned path, whatever its status: (status, body). `bearer`: sent as
  // "Authorization: Bearer <bearer>" when not empty.
  StatusOr<std::pair<int, std::string>> GetAny(const std::string& path, const std::string& bearer = "");

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ty::cli
