#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/strings.h"
#include "exec/local/launcher.h"
#include "exec/local/supervisor.h"

namespace ty::cli {

StatusOr<std::pair<std::string, std::string>> ReadCredentialsFile(const std::string& path, const std::string& profile) {
  std::ifstream in(path);
  if (!in) return NotFound("no credentials file at " + path);
  std::string line, section, id, secret;
  while (std::getline(in, line)) {
    std::string_view l = Trim(line);
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l.front() == '[' && l.back() == ']') {
      section = std::string(Trim(l.substr(1, l.size() - 2)));
      continue;
    }
    if (section != profile) continue;
    auto eq = l.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(Trim(l.substr(0, eq)));
    std::string value(Trim(l.substr(eq + 1)));
    if (key == "aws_access_key_id") id = value;
    if (key == "aws_secret_access_key") secret = value;
  }
  if (id.empty() || secret.empty()) return NotFound("profile " + profile + " not found in " + path);
  return std::make_pair(id, secret);
}

int Main(int argc, char** argv) {
  // The supervisor entry point is internal: the local executor starts it, people do not.
  if (argc >= 3 && std::string(argv[1]) == "supervise") {
    if (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h") {
      std::printf("usage: trainyard supervise ATTEMPT_DIR\n(started by the local executor; see docs/design/attempt-spec.md)\n");
      return 0;
    }
    return ty::exec::RunSupervisor(argv[2]);
  }
  // The distributed launchers an instance runs (exec/local/launcher.h), when the supervisor is
  // this binary rather than trainyard-supervisor.
  if (argc >= 2 && (std::string(argv[1]) == "launch" || std::string(argv[1]) == "rsh"))
    return ty::exec::local::RunLauncher(std::vector<std::string>(argv + 1, argv + argc));

  CLI::App app{"trainyard: queues, fair scheduling and SageMaker-style training jobs on your own machines.\n"
               "Speaks the AWS Batch and SageMaker APIs; boto3 and the aws CLI work with --endpoint-url."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainyard 0.1.0");
  std::function<int()> run;
  AddServeCommand(app, run);
  AddClientCommands(app, run);
  AddSimulateCommand(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return run ? run() : 0;
}

}  // namespace ty::cli
