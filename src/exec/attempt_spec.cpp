#include "exec/attempt_spec.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ty::exec {

using nlohmann::json;

namespace {

json StringMap(const std::map<std::string, std::string>& m) {
  json o = json::object();
  for (const auto& [k, v] : m) o[k] = v;
  return o;
}

json EncodeChannel(const Channel& c) {
  json o = {{"name", c.name},
            {"content_type", c.content_type},
            {"input_mode", c.input_mode},
            {"record_wrapper", c.record_wrapper},
            {"distribution", c.distribution}};
  if (c.file_system) {
    o["file_system"] = {{"file_system_id", c.file_system->file_system_id},
                        {"directory_path", c.file_system->directory_path},
                        {"read_only", c.file_system->read_only}};
  } else {
    o["uri"] = c.uri;
    o["data_type"] = c.data_type;
    if (c.shuffle_seed) o["shuffle_seed"] = *c.shuffle_seed;
  }
  return o;
}

// A decode error names the member; it is caught once, in DecodeAttemptSpec.
struct BadSpec : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const json* Member(const json& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string Str(const json& o, const char* key, std::string fallback = "") {
  const json* v = Member(o, key);
  if (!v) return fallback;
  if (!v->is_string()) throw BadSpec(std::string(key) + " must be a string");
  return v->get<std::string>();
}

int64_t Int(const json& o, const char* key, int64_t fallback) {
  const json* v = Member(o, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw BadSpec(std::string(key) + " must be an integer");
  return v->get<int64_t>();
}

bool Bool(const json& o, const char* key, bool fallback) {
  const json* v = Member(o, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw BadSpec(std::string(key) + " must be a boolean");
  return v->get<bool>();
}

const json& Object(const json& v, const std::string& what) {
  if (!v.is_object()) throw BadSpec(what + " must be an object");
  return v;
}

std::map<std::string, std::string> StrMap(const json& o, const char* key) {
  std::map<std::string, std::string> out;
  const json* v = Member(o, key);
  if (!v) return out;
  for (const auto& [k, x] : Object(*v, key).items()) {
    if (!x.is_string()) throw BadSpec(std::string(key) + "." + k + " must be a string");
    out[k] = x.get<std::string>();
  }
  return out;
}

Channel DecodeChannel(const json& o) {
  Object(o, "channels[]");
  Channel c;
  c.name = Str(o, "name");
  if (c.name.empty()) throw BadSpec("channels[].name is required");
  c.content_type = Str(o, "content_type");
  c.input_mode = Str(o, "input_mode", c.input_mode);
  c.record_wrapper = Str(o, "record_wrapper", c.record_wrapper);
  c.distribution = Str(o, "distribution", c.distribution);
  if (const json* f = Member(o, "file_system")) {
    Object(*f, "channels[].file_system");
    FileSystemSource fs;
    fs.file_system_id = Str(*f, "file_system_id");
    fs.directory_path = Str(*f, "directory_path", fs.directory_path);
    fs.read_only = Bool(*f, "read_only", fs.read_only);
    c.file_system = fs;
  } else {
    c.uri = Str(o, "uri");
    c.data_type = Str(o, "data_type", c.data_type);
    if (Member(o, "shuffle_seed")) c.shuffle_seed = Int(o, "shuffle_seed", 0);
  }
  return c;
}

}  // namespace

std::string Encode(const AttemptSpec& s) {
  json o;
  o["attempt_id"] = s.attempt_id;
  if (s.kind == AttemptKind::kContainer) o["kind"] = "container";  // absent: a training job's
  o["training_job_name"] = s.training_job_name;
  o["training_job_arn"] = s.training_job_arn;
  o["region"] = s.region;
  o["instance_type"] = s.instance_type;
  o["instance_count"] = s.instance_count;
  o["vcpus"] = s.vcpus;
  o["gpus"] = s.gpus;
  o["memory_mib"] = s.memory_mib;
  o["volume_size_gb"] = s.volume_size_gb;
  o["setup_command"] = s.setup_command;
  o["command"] = s.command;
  if (!s.image.empty()) {
    o["image"] = s.image;
    o["image_command"] = s.image_command == ImageCommand::kCmd ? "cmd" : "train";
  }
  if (s.script_mode) o["script_mode"] = {{"program", s.script_mode->program}, {"submit_uri", s.script_mode->submit_uri}};
  o["hyperparameters"] = StringMap(s.hyperparameters);
  o["environment"] = StringMap(s.environment);
  o["extra_env"] = StringMap(s.extra_env);
  o["network_isolation"] = s.network_isolation;
  json channels = json::array();
  for (const auto& c : s.channels) channels.push_back(EncodeChannel(c));
  o["channels"] = std::move(channels);
  o["output_prefix"] = s.output_prefix;
  o["compress"] = s.compress;
  o["checkpoint"] = s.checkpoint ? json{{"uri", s.checkpoint->uri}, {"local_path", s.checkpoint->local_path}} : json();
  if (s.warm_pool)
    o["warm_pool"] = {{"id", s.warm_pool->id}, {"workspace", s.warm_pool->workspace}, {"reused_from", s.warm_pool->reused_from}};
  if (s.data_access) {
    const iam::PrincipalKeys& who = s.data_access->principal;
    o["data_access"] = {{"principal", {{"arn", who.arn}, {"principal_arn", who.principal_arn}, {"username", who.username},
                                       {"user_id", who.user_id}, {"tags", StringMap(who.tags)}}},
                        {"policies", json::array()}};
    for (const auto& p : s.data_access->policies)
      o["data_access"]["policies"].push_back({{"name", p.name}, {"document", p.document}});
  }
  o["stop_grace_seconds"] = s.stop_grace_seconds;
  o["max_runtime_seconds"] = s.max_runtime_seconds;
  return o.dump();
}

StatusOr<AttemptSpec> DecodeAttemptSpec(std::string_view text) {
  json o = json::parse(text, nullptr, false);
  if (o.is_discarded() || !o.is_object()) return InvalidArgument("attempt spec: not a JSON object");
  try {
    AttemptSpec s;
    s.attempt_id = Str(o, "attempt_id");
    if (s.attempt_id.empty()) throw BadSpec("attempt_id is required");
    if (const std::string kind = Str(o, "kind", "training"); kind == "container") {
      s.kind = AttemptKind::kContainer;
    } else if (kind != "training") {
      throw BadSpec("kind must be training or container, not " + kind);
    }
    s.training_job_name = Str(o, "training_job_name");
    s.training_job_arn = Str(o, "training_job_arn");
    s.region = Str(o, "region");
    s.instance_type = Str(o, "instance_type");
    if (s.instance_type.empty()) throw BadSpec("instance_type is required");
    const int64_t count = Int(o, "instance_count", 1);
    if (count < 1 || count > 100000) throw BadSpec("instance_count must be at least 1");
    s.instance_count = static_cast<int>(count);
    s.vcpus = static_cast<int>(Int(o, "vcpus", s.vcpus));
    s.gpus = static_cast<int>(Int(o, "gpus", s.gpus));
    s.memory_mib = Int(o, "memory_mib", s.memory_mib);
    s.volume_size_gb = Int(o, "volume_size_gb", s.volume_size_gb);
    s.setup_command = Str(o, "setup_command");
    if (const json* cmd = Member(o, "command")) {
      if (!cmd->is_array()) throw BadSpec("command must be an array of strings");
      for (const auto& a : *cmd) {
        if (!a.is_string()) throw BadSpec("command must be an array of strings");
        s.command.push_back(a.get<std::string>());
      }
    }
    if (const json* sm = Member(o, "script_mode")) {
      Object(*sm, "script_mode");
      s.script_mode = ScriptMode{Str(*sm, "program"), Str(*sm, "submit_uri")};
    }
    s.image = Str(o, "image");
    const std::string image_command = Str(o, "image_command", "train");
    if (image_command != "train" && image_command != "cmd") throw BadSpec("image_command must be \"train\" or \"cmd\"");
    s.image_command = image_command == "cmd" ? ImageCommand::kCmd : ImageCommand::kTrain;
    s.hyperparameters = StrMap(o, "hyperparameters");
    s.environment = StrMap(o, "environment");
    s.extra_env = StrMap(o, "extra_env");
    s.network_isolation = Bool(o, "network_isolation", false);
    if (const json* chs = Member(o, "channels")) {
      if (!chs->is_array()) throw BadSpec("channels must be an array");
      for (const auto& c : *chs) s.channels.push_back(DecodeChannel(c));
    }
    s.output_prefix = Str(o, "output_prefix");
    s.compress = Bool(o, "compress", true);
    if (const json* ck = Member(o, "checkpoint")) {
      Object(*ck, "checkpoint");
      CheckpointConfig c;
      c.uri = Str(*ck, "uri");
      c.local_path = Str(*ck, "local_path", c.local_path);
      s.checkpoint = c;
    }
    if (const json* wp = Member(o, "warm_pool")) {
      Object(*wp, "warm_pool");
      s.warm_pool = WarmPoolSpec{Str(*wp, "id"), Str(*wp, "workspace"), Str(*wp, "reused_from")};
      if (s.warm_pool->workspace.empty()) throw BadSpec("warm_pool.workspace is required");
    }
    if (const json* da = Member(o, "data_access")) {
      Object(*da, "data_access");
      DataAccess access;
      const json* who = Member(*da, "principal");
      if (!who) throw BadSpec("data_access.principal is required");
      Object(*who, "data_access.principal");
      access.principal = {Str(*who, "arn"), Str(*who, "principal_arn"), Str(*who, "username"), Str(*who, "user_id"),
                          StrMap(*who, "tags")};
      if (const json* docs = Member(*da, "policies")) {
        if (!docs->is_array()) throw BadSpec("data_access.policies must be an array");
        for (const auto& d : *docs)
          access.policies.push_back({Str(Object(d, "data_access.policies[]"), "name"), Str(d, "document")});
      }
      s.data_access = std::move(access);
    }
    s.stop_grace_seconds = Int(o, "stop_grace_seconds", s.stop_grace_seconds);
    s.max_runtime_seconds = Int(o, "max_runtime_seconds", s.max_runtime_seconds);
    return s;
  } catch (const BadSpec& e) {
    return InvalidArgument(std::string("attempt spec: ") + e.what());
  }
}

void UseContainerImage(AttemptSpec* spec, std::string image, std::vector<std::string> command) {
  spec->image = std::move(image);
  spec->command = std::move(command);
  spec->script_mode.reset();
  spec->image_command = ImageCommand::kCmd;
  spec->kind = AttemptKind::kContainer;
}

std::string ReservedEnvironmentRule(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE",
      "TRAINING_JOB_NAME", "TRAINING_JOB_ARN", "SAGEMAKER_SUBMIT_DIRECTORY", "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"};
  static constexpr std::string_view kPrefixes[] = {"AWS_CONTAINER_", "AWS_ENDPOINT_URL_", "AWS_BATCH", "SM_", "TRAINYARD_"};
  for (std::string_view n : kNames)
    if (name == n) return "the server sets " + std::string(n) + " for the job (its credentials, endpoint and identity rest on it)";
  for (std::string_view p : kPrefixes)
    if (name.substr(0, p.size()) == p)
      return "names starting with " + std::string(p) + " are reserved for the variables the server sets for the job";
  return "";
}

}  // namespace ty::exec
