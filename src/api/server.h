// The HTTP front door: one listener for Batch (rest-json), SageMaker (json 1.1) and trainyard's
// own endpoints. Every request is authenticated with SigV4 before anything else happens.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace ty {
struct Config;
}
namespace ty::control {
class Controller;
}
namespace ty::http {
class Server;
struct BodyPlan;
struct Limits;
struct Request;
struct Response;
}  // namespace ty::http

namespace ty::api {

// The path of one of trainyard's own operations (POST /trainyard/v1/..., signed as "sagemaker"),
// e.g. "/trainyard/v1/queue-standings" for QueueStandings; "" when `operation` is none of them.
std::string OwnOperationPath(const std::string& operation);

struct RootCredential {
  std::string access_key_id;
  std::string secret_access_key;
};

// The listener's limits from the configuration ([server]).
http::Limits ListenerLimits(const Config& config);
// The answer to a request the listener refuses itself (413, 431, 503, ...), in the shape the
// request's protocol expects.
http::Response RefuseRequest(int status, const std::string& message, const http::Request* head);

class ApiServer {
 public:
  // With `listener` null the server has a listener of its own (Bind, UseTls, Run, Stop). Given
  // one, that listener belongs to the caller, who binds and runs it and hands its requests to
  // Serve() (several servers, one leader: cli/serve_ha.cpp); StartServices() then starts what
  // Bind() would.
  ApiServer(control::Controller& controller, RootCredential root, http::Server* listener = nullptr);
  ~ApiServer();

  http::Response Serve(const http::Request& req);
  // What the listener does with the body of a request with this head (http::BodyPlan): its limit
  // ([s3] max_upload_bytes for object data); whom it is charged to in the buffered budget (the
  // access key, when a signature over the head proves it: S3's, or a peer region's); or withhold it,
  // when the head already fails authentication (the answer is that refusal, Serve()). Quick and
  // non-blocking: it runs on the listener's I/O thread.
  http::BodyPlan PlanBody(const http::Request& head) const;
  // Webhook delivery, the bucket sweeper and the console's files.
  Status StartServices();

  // Binds host:port (port 0 picks a free one) and returns the bound port.
  StatusOr<int> Bind(const std::string& host, int port);
  // A port this server listens on, given by the caller that binds the listener (Bind notes its
  // own): API destinations may not reach it on this host (obs/outbound.h).
  void NoteListenerPort(int port);
  // Serves HTTPS with this PEM certificate and key (http::Server::UseTls). REQUIRES: before Run().
  Status UseTls(const std::string& certificate_file, const std::string& key_file);
  // Serves until Stop(). REQUIRES: Bind() succeeded.
  void Run();
  void Stop();

  struct Impl;  // server.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ty::api
