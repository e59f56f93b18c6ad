// `trainyard serve` over PostgreSQL: one of several servers, one of which leads (serve_ha.cpp;
// docs/operations.md, "High availability"). Internal to the cli library.
#pragma once

#include <signal.h>

#include <memory>
#include <optional>
#include <string>

#include "api/server.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/status.h"
#include "http/server.h"
#include "store/postgres.h"

namespace ty::control {
class Controller;
}

namespace ty::cli {

// The composition root (serve.cpp): the data directory's folders, the store (SQLite, or
// PostgreSQL with `postgres_options`), the event log, the executor, and the controller over them.
StatusOr<std::unique_ptr<control::Controller>> OpenController(Config config, const Clock& clock, const std::string& self_exe,
                                                              store::PostgresOptions postgres_options = {});
// What a serving controller needs from the process: the test clock, the event renderer, and the
// address role jobs call back on (this server's listener).
void WireController(control::Controller& controller, OffsetClock* offset_clock, const std::string& host, int port,
                    const std::optional<http::TlsFiles>& tls_files);

struct ReplicatedServe {
  Config config;  // with [store] url
  std::string host;
  int port = 0;
  api::RootCredential root;
  std::optional<http::TlsFiles> tls_files;
  const Clock& clock;
  OffsetClock* offset_clock = nullptr;  // --clock=offset
  std::string self_exe;
  sigset_t signals;  // blocked; the caller's thread waits for them
};

// Binds the listener, joins the servers over the database and serves until a signal: as a
// follower that passes requests to the leader, and as the leader once it holds the lease. The
// process's exit status: 0 after a signal, 1 when it could not start, 75 when it was deposed.
int RunReplicated(const ReplicatedServe& serve);

}  // namespace ty::cli
