// `trainyard serve`: the server process.
#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

#include "api/encode.h"
#include "api/server.h"
#include "cli/cli.h"
#include "cli/serve_ha.h"
#include "control/controller.h"
#include "core/config.h"
#include "core/strings.h"
#include "exec/local/gpus.h"
#include "exec/local/host_settings.h"
#include "exec/local/local_executor.h"
#include "exec/slurm/slurm_executor.h"
#include "http/certificate.h"
#include "store/event_log.h"
#include "store/store.h"

namespace ty::cli {

namespace fs = std::filesystem;

namespace {

// The root credential: from the environment, else the data directory's credentials file,
// created on first start (mode 0600, AWS shared-credentials format, profile "trainyard").
StatusOr<api::RootCredential> RootCredentialFor(const std::string& data_dir) {
  const char* id = std::getenv("TRAINYARD_ROOT_ACCESS_KEY_ID");
  const char* secret = std::getenv("TRAINYARD_ROOT_SECRET_ACCESS_KEY");
  if (id && secret && *id && *secret) return api::RootCredential{id, secret};
  std::string path = data_dir + "/credentials";
  if (auto c = ReadCredentialsFile(path, "trainyard"); c.ok()) return api::RootCredential{c->first, c->second};
  api::RootCredential cred{"AKIA" + RandomAlnum(16, true), RandomAlnum(40, false)};
  // Several servers may share the data directory (docs/operations.md, "High availability") and
  // start at once: the file is linked into place, never renamed over, so the first one written is
  // the one every server uses.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return Internal("cannot write " + tmp);
    std::string text = "[trainyard]\naws_access_key_id = " + cred.access_key_id +
                       "\naws_secret_access_key = " + cred.secret_access_key + "\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
    ::close(fd);
    const bool linked = ok && ::link(tmp.c_str(), path.c_str()) == 0;
    const int link_errno = errno;
    ::unlink(tmp.c_str());
    if (!linked && ok && link_errno == EEXIST) {
      if (auto c = ReadCredentialsFile(path, "trainyard"); c.ok()) return api::RootCredential{c->first, c->second};
    }
    if (!linked) return Internal("cannot write " + path);
  }
  spdlog::info("generated a root credential in {}", path);
  return cred;
}

// The listener's certificate: the configured pair, else the self-signed one kept in <data_dir>/tls
// (made on first start for localhost, the loopback addresses, this host's name and the listen
// host). Logs where it is and its fingerprint, which clients of a self-signed server compare.
StatusOr<http::TlsFiles> TlsFilesFor(const Config& config, const std::string& host) {
  if (!config.tls_certificate_file.empty()) {
    auto fingerprint = http::CertificateFingerprint(config.tls_certificate_file);
    if (!fingerprint.ok())
      return InvalidArgument("server.tls_certificate_file: " + fingerprint.status().message());
    spdlog::info("TLS certificate {} (SHA-256 fingerprint {})", config.tls_certificate_file, *fingerprint);
    return http::TlsFiles{config.tls_certificate_file, config.tls_key_file};
  }
  std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
  char hostname[256] = {};
  if (::gethostname(hostname, sizeof hostname - 1) == 0 && *hostname) names.push_back(hostname);
  if (host != "0.0.0.0" && host != "::" && !host.empty()) names.push_back(host);
  const std::string dir = config.data_dir + "/tls";
  auto files = http::EnsureSelfSignedCertificate(dir, names, SystemClock::instance().now_ms() / 1000);
  if (!files.ok()) return files.status();
  auto fingerprint = http::CertificateFingerprint(files->certificate_file);
  if (!fingerprint.ok()) return fingerprint.status();
  spdlog::info("TLS with the self-signed certificate {} (SHA-256 fingerprint {}); clients trust it with "
               "--ca-bundle {} or AWS_CA_BUNDLE",
               files->certificate_file, *fingerprint, files->certificate_file);
  if (auto missing = http::NamesNotCovered(files->certificate_file, names); missing.ok() && !missing->empty()) {
    std::string list;
    for (const auto& m : *missing) list += (list.empty() ? "" : ", ") + m;
    spdlog::warn("the self-signed certificate does not name {}; clients reaching the server by it will refuse it "
                 "(remove {} and restart to make a new certificate, with a new fingerprint)",
                 list, dir);
  }
  return files;
}

}  // namespace

// The composition root: the data directory's folders, the SQLite store and event log, the local
// executor (its supervisors poke the controller awake), and the controller over them.
StatusOr<std::unique_ptr<control::Controller>> OpenController(Config config, const Clock& clock, const std::string& self_exe,
                                                              store::PostgresOptions postgres_options) {
  config.data_dir = fs::absolute(config.data_dir).lexically_normal().string();
  const std::string& dir = config.data_dir;
  std::error_code ec;
  for (const char* sub : {"", "attempts", "buckets", "run", "pools"}) {
    fs::create_directories(fs::path(dir) / sub, ec);
    if (ec) return Internal("cannot create " + (fs::path(dir) / sub).string() + ": " + ec.message());
  }
  // executor.sandbox resolved on this machine: "bwrap" where a job's sandbox can be built as the
  // supervisor builds it, else "none"; an error when the configuration insists on bwrap.
  auto sandbox = exec::LocalExecutor::ResolveSandbox(config.sandbox, config.job_user);
  if (!sandbox.ok()) return sandbox.status();
  if (!sandbox->problem.empty()) spdlog::warn("jobs run without a sandbox: {}", sandbox->problem);
  config.sandbox = sandbox->mode;

  control::Ports ports;
  // The state: SQLite in the data directory, or PostgreSQL when [store] url names one.
  const bool postgres = !config.store_url.empty();
  auto store = postgres ? store::OpenPostgresStore(config.store_url, std::move(postgres_options))
                        : store::OpenSqliteStore(dir + "/trainyard.db", config.sqlite_synchronous_full);
  if (!store.ok()) return store.status();
  ports.store = std::move(store).value();
  auto events = postgres ? store::OpenPostgresEventLog(config.store_url) : store::EventLog::Open(dir + "/trainyard.db");
  if (!events.ok()) return events.status();
  ports.events = std::move(events).value();
  spdlog::info("state in {}", postgres ? "PostgreSQL ([store] url)" : dir + "/trainyard.db");

  // The executor exists before the controller it wakes; a poke before the controller is set is
  // not lost: the first turn polls anyway. The controller owns the executor, so it outlives it.
  auto wake_target = std::make_shared<std::atomic<control::Controller*>>(nullptr);
  auto wake = [wake_target] {
    if (control::Controller* c = wake_target->load()) c->Wake();
  };
  // The small supervisor binary beside this one starts faster; the server itself can also do it.
  fs::path small = fs::path(self_exe).parent_path() / "trainyard-supervisor";
  if (config.executor_kind == "slurm") {
    // Attempts run on the Slurm cluster (docs/slurm.md): the supervisor binary runs on the nodes,
    // so it must be the small one, at the same path there.
    if (!fs::exists(small)) return FailedPrecondition("executor.kind = \"slurm\" needs trainyard-supervisor beside trainyard: " + small.string());
    exec::SlurmExecutor::Options so;
    so.attempts_root = dir + "/attempts";
    so.supervisor_binary = small.string();
    so.host = exec::local::HostSettingsFor(config, dir, sandbox->mode);
    so.slurm = config.slurm;
    so.instance_types = config.instance_types;
    so.notify_address = config.slurm.notify_address;
    so.wake = wake;
    so.clock = &clock;
    ports.executor = std::make_unique<exec::SlurmExecutor>(so);
  } else {
    exec::LocalExecutor::Options eo;
    eo.attempts_root = dir + "/attempts";
    eo.supervisor_binary = fs::exists(small) ? small.string() : self_exe;
    eo.host = exec::local::HostSettingsFor(config, dir, sandbox->mode);
    eo.wake = wake;
    eo.clock = &clock;
    // The GPU inventory (docs/gpus.md): configured, else the device nodes found.
    const std::set<int> out_of_service(config.gpus_out_of_service.begin(), config.gpus_out_of_service.end());
    if (config.gpus) {
      for (int g : *config.gpus)
        if (!out_of_service.count(g)) eo.gpus.push_back(g);
    } else {
      const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES");
      eo.gpus = exec::local::DiscoverGpus(config.gpu_device_dir, cuda ? std::optional<std::string>(cuda) : std::nullopt,
                                          out_of_service);
    }
    int64_t wanted = 0;
    for (const auto& t : config.instance_types) wanted += static_cast<int64_t>(t.count) * t.gpus;
    if (!eo.gpus.empty())
      spdlog::info("GPUs: {} in service ({}), each given to one instance at a time", eo.gpus.size(),
                   exec::local::GpuList(eo.gpus));
    if (wanted > static_cast<int64_t>(eo.gpus.size()) && !eo.gpus.empty())
      spdlog::warn("the instance types declare {} GPUs but the host has {} in service: an instance that finds none "
                   "free fails to start with a CapacityError", wanted, eo.gpus.size());
    ports.executor = std::make_unique<exec::LocalExecutor>(eo);
  }

  auto controller = control::Controller::Open(config, clock, std::move(ports));
  if (controller.ok()) wake_target->store(controller->get());
  return controller;
}

void WireController(control::Controller& controller, OffsetClock* offset_clock, const std::string& host, int port,
                    const std::optional<http::TlsFiles>& tls_files) {
  if (offset_clock) {
    controller.SetAdjustableClock(offset_clock);
    spdlog::warn("--clock=offset: the server's clock can be moved on by `trainyard admin advance-clock` (test-only)");
  }
  controller.SetEventRenderer([&config = controller.config()](const control::State& s, const control::EventTrigger& e,
                                                              uint64_t seq) { return api::RenderEvent(config, s, e, seq); });
  // Role jobs call back on the loopback address when the listener is on every address.
  std::string job_host = host == "0.0.0.0" || host.empty() ? "127.0.0.1" : host == "::" ? "::1" : host;
  if (job_host.find(':') != std::string::npos) job_host = "[" + job_host + "]";
  controller.SetJobEndpoint(std::string(tls_files ? "https" : "http") + "://" + job_host + ":" + std::to_string(port),
                            tls_files ? tls_files->certificate_file : "");
}

void AddServeCommand(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand("serve", "Start the trainyard server (API, scheduler and local executor).");
  cmd->footer(
      "s3:// buckets are directories under <data-dir>/buckets unless [object_store] in the config file (or\n"
      "AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)\n"
      "names an S3-compatible endpoint for them (see docs/object-store.md).\n"
      "Several servers, one per region, are joined by [regions] peers and peer_secret_file in the config\n"
      "file: a request signed for a peer's region is forwarded there (see docs/regions.md).\n"
      "Several servers over one PostgreSQL ([store] url) share the work of one: one leads under a lease, the\n"
      "others pass requests to it and take over when it goes (see docs/operations.md, \"High availability\";\n"
      "`trainyard admin status` shows them). A server deposed as the leader exits with status 75.");
  auto opts = std::make_shared<std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>>();
  cmd->add_option("--listen", std::get<0>(*opts), "HOST:PORT to listen on (default 127.0.0.1:8080; port 0 picks a free port)");
  cmd->add_option("--data-dir", std::get<1>(*opts), "Directory for state, attempts, buckets, the object cache and credentials (default ./trainyard-data)");
  cmd->add_option("--config", std::get<2>(*opts), "TOML configuration file (see docs/configuration.md)");
  cmd->add_option("--region", std::get<3>(*opts), "AWS region this server answers as (default us-east-1)");
  cmd->add_option("--account-id", std::get<4>(*opts), "Account id used in ARNs (default 000000000000)");
  cmd->add_option("--log-level", std::get<5>(*opts), "trace, debug, info, warn or error (default info)");
  auto clock_mode = std::make_shared<std::string>("system");
  cmd->add_option("--clock", *clock_mode,
                  "system (default), or offset: for tests only, the wall clock plus an offset that "
                  "`trainyard admin advance-clock` moves on (see docs/warm-pools.md)")
      ->check(CLI::IsMember({"system", "offset"}));
  cmd->callback([&run, opts, clock_mode] {
    run = [opts, clock_mode]() -> int {
      auto& [listen, data_dir, config_path, region, account, level] = *opts;
      // stdout carries only the "listening on" line; logs go to stderr.
      spdlog::set_default_logger(spdlog::stderr_color_mt("trainyard"));
      spdlog::set_level(level.empty() ? spdlog::level::info : spdlog::level::from_str(level));
      Config config = DefaultConfig();
      if (!config_path.empty()) {
        auto loaded = LoadConfigFile(config_path, config);
        if (!loaded.ok()) {
          std::fprintf(stderr, "trainyard: %s\n", loaded.status().message().c_str());
          return 2;
        }
        config = *loaded;
      }
      if (!listen.empty()) config.listen = listen;
      if (!data_dir.empty()) config.data_dir = data_dir;
      if (!region.empty()) config.region = region;
      if (!account.empty()) config.account_id = account;
      ApplyEnvironment(&config);
      auto colon = config.listen.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "trainyard: --listen must be HOST:PORT, not '%s'\n", config.listen.c_str());
        return 2;
      }
      std::string host = config.listen.substr(0, colon);
      int port = std::atoi(config.listen.c_str() + colon + 1);

      // Signals are taken synchronously by the main thread; every other thread blocks them.
      sigset_t sigs;
      sigemptyset(&sigs);
      sigaddset(&sigs, SIGTERM);
      sigaddset(&sigs, SIGINT);
      pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
      signal(SIGPIPE, SIG_IGN);

      // Every open connection holds a descriptor: take the hard limit, so that tens of thousands
      // of idle clients fit (server.max_connections is lowered to what does).
      rlimit nofile{};
      if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        rlim_t soft = nofile.rlim_cur;
        nofile.rlim_cur = nofile.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &nofile) != 0)
          spdlog::warn("cannot raise the open-file limit from {}: {}", soft, std::strerror(errno));
      }

      std::error_code ec;
      fs::create_directories(config.data_dir, ec);
      auto cred = RootCredentialFor(config.data_dir);
      if (!cred.ok()) {
        std::fprintf(stderr, "trainyard: %s\n", cred.status().message().c_str());
        return 1;
      }
      // The certificate before any state is opened: a bad path ends the start at once.
      const bool tls = config.TlsEnabled();
      std::optional<http::TlsFiles> tls_files;
      if (tls) {
        auto files = TlsFilesFor(config, host);
        if (!files.ok()) {
          std::fprintf(stderr, "trainyard: TLS: %s\n", files.status().message().c_str());
          return 1;
        }
        tls_files = *files;
      }
      char exe[4096];
      ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
      std::string self = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "trainyard";
      static OffsetClock offset_clock;  // outlives the controller (the process ends with _Exit)
      const bool offset = *clock_mode == "offset";
      const Clock& clock = offset ? static_cast<const Clock&>(offset_clock) : SystemClock::instance();
      // Over PostgreSQL: one of several servers, leading or following (cli/serve_ha.cpp).
      if (!config.store_url.empty())
        return RunReplicated(ReplicatedServe{config, host, port, *cred, tls_files, clock, offset ? &offset_clock : nullptr, self, sigs});
      auto controller = OpenController(config, clock, self);
      if (!controller.ok()) {
        std::fprintf(stderr, "trainyard: %s\n", controller.status().message().c_str());
        return 1;
      }
      api::ApiServer server(**controller, *cred);
      if (tls_files) {
        Status st = server.UseTls(tls_files->certificate_file, tls_files->key_file);
        if (!st.ok()) {
          std::fprintf(stderr, "trainyard: TLS: %s\n", st.message().c_str());
          (*controller)->Shutdown();
          return 1;
        }
      }
      auto bound = server.Bind(host, port);
      if (!bound.ok()) {
        std::fprintf(stderr, "trainyard: %s\n", bound.status().message().c_str());
        (*controller)->Shutdown();
        return 1;
      }
      WireController(**controller, offset ? &offset_clock : nullptr, host, *bound, tls_files);
      (*controller)->Start();  // after the listener is bound: a job launched now knows where it is
      std::promise<void> http_done;
      auto http_stopped = http_done.get_future();
      std::thread http([&] {
        server.Run();
        http_done.set_value();
      });
      std::printf("listening on %s://%s:%d\n", tls ? "https" : "http", host.c_str(), *bound);
      std::fflush(stdout);
      if (config.console.enabled)
        spdlog::info("web console at {}://{}:{}/console/ (sign in with an access key of this server)", tls ? "https" : "http",
                     host, *bound);
      int sig = 0;
      sigwait(&sigs, &sig);
      spdlog::info("received signal {}; shutting down", sig);
      server.Stop();
      (*controller)->Shutdown();  // finishes the current turn; later commands get ServiceUnavailable
      // Idle keep-alive connections hold HTTP workers for up to their timeout; the state is
      // durable by now, so do not wait for them.
      if (http_stopped.wait_for(std::chrono::seconds(2)) == std::future_status::ready) {
        http.join();
      } else {
        http.detach();
      }
      spdlog::info("stopped");
      spdlog::shutdown();
      std::fflush(nullptr);
      std::_Exit(0);
      return 0;
    };
  });
}

}  // namespace ty::cli
