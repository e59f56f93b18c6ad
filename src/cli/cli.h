// The trainyard command line. Every client subcommand speaks the same signed HTTP API as boto3.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>

#include "core/status.h"

namespace CLI {
class App;
}

namespace ty::cli {

int Main(int argc, char** argv);

// Reads one profile of an AWS shared-credentials file: (access key id, secret).
StatusOr<std::pair<std::string, std::string>> ReadCredentialsFile(const std::string& path, const std::string& profile);

void AddServeCommand(CLI::App& app, std::function<int()>& run);
void AddClientCommands(CLI::App& app, std::function<int()>& run);
void AddSimulateCommand(CLI::App& app, std::function<int()>& run);

}  // namespace ty::cli
