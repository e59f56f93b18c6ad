#include "exec/image/command.h"

namespace ty::exec::image {

StatusOr<std::vector<std::string>> ImageArgv(const ImageConfig& config, ImageCommand mode,
                                             const std::vector<std::string>& command) {
  std::vector<std::string> argv;
  if (mode == ImageCommand::kTrain) {
    if (!command.empty()) return command;
    argv = config.entrypoint;
    argv.push_back("train");
    return argv;
  }
  argv = config.entrypoint;
  const auto& tail = command.empty() ? config.cmd : command;
  argv.insert(argv.end(), tail.begin(), tail.end());
  if (argv.empty())
    return InvalidArgument("the image has neither an Entrypoint nor a Cmd, and the job gives no command");
  return argv;
}

std::map<std::string, std::string> ImageEnvironment(const ImageConfig& config) {
  std::map<std::string, std::string> env;
  for (const std::string& kv : config.env) {
    size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  return env;
}

std::string ImageWorkingDir(const ImageConfig& config) {
  return config.working_dir.empty() || config.working_dir[0] != '/' ? "/" : config.working_dir;
}

}  // namespace ty::exec::image
