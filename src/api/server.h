// The HTTP front door: one listener for Batch (rest-json), SageMaker (json 1.1) and trainyard's
// own endpoints. Every request is authenticated with SigV4 before anything else happens.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace ty::control {
class Controller;
}

namespace ty::api {

// The path of one of trainyard's own operations (POST /trainyard/v1/..., signed as "sagemaker"),
// e.g. "/trainyard/v1/queue-standings" for QueueStandings; "" when `operation` is none of them.
std::string OwnOperationPath(const std::string& operation);

struct RootCredential {
  std::string access_key_id;
  std::string secret_access_key;
};

class ApiServer {
 public:
  ApiServer(control::Controller& controller, RootCredential root);
  ~ApiServer();

  // Binds host:port (port 0 picks a free one) and returns the bound port.
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves HTTPS with this PEM certificate and key (http::Server::UseTls). REQUIRES: before Run().
  Status UseTls(const std::string& certificate_file, const std::string& key_file);
  // Serves until Stop(). REQUIRES: Bind() succeeded.
  void Run();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ty::api
