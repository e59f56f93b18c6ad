#include "core/training_spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/json_read.h"
#include "core/training_spec_json.h"

namespace ty {

using nlohmann::json;

namespace {

// Lenient readers (core/json_read.h): the request passed CheckTrainingRequest (or is a stored
// form), so a member of the wrong type is treated as absent, never thrown on.
using namespace json_read;
// A value as the executor passes it on: a string as it is, anything else as its JSON text.
std::string AsString(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }
std::vector<std::string> Strings(const json& o, const char* key) {
  std::vector<std::string> out;
  const json& v = Member(o, key);
  if (v.is_array())
    for (const auto& x : v) out.push_back(AsString(x));
  return out;
}
std::map<std::string, std::string> StringMap(const json& o, const char* key) {
  std::map<std::string, std::string> out;
  const json& v = Member(o, key);
  if (v.is_object())
    for (const auto& [k, x] : v.items()) out[k] = AsString(x);
  return out;
}
json TagList(const Tags& tags) {
  json out = json::array();
  for (const auto& [k, v] : tags) out.push_back({{"Key", k}, {"Value", v}});
  return out;
}

// Appends the UTF-8 encoding of code point `cp`.
void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The four hex digits at text[i..i+4), or nullopt.
std::optional<uint32_t> Hex4(const std::string& text, size_t i) {
  if (i + 4 > text.size()) return std::nullopt;
  uint32_t v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const char c = text[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
    else return std::nullopt;
  }
  return v;
}

}  // namespace

std::string TrainingSpec::OutputPathTrimmed() const {
  std::string p = s3_output_path;
  while (!p.empty() && p.back() == '/') p.pop_back();
  return p;
}

bool DecodeTrainingSpec(const json& req, TrainingSpec* out) {
  if (!req.is_object()) return false;
  TrainingSpec s;
  s.training_job_name = StringOr(req, "TrainingJobName");
  s.role_arn = StringOr(req, "RoleArn");
  const json& alg = Member(req, "AlgorithmSpecification");
  s.training_image = StringOr(alg, "TrainingImage");
  s.training_input_mode = StringOr(alg, "TrainingInputMode", "File");
  s.container_entrypoint = Strings(alg, "ContainerEntrypoint");
  s.container_arguments = Strings(alg, "ContainerArguments");
  if (const json& defs = Member(alg, "MetricDefinitions"); defs.is_array())
    for (const auto& d : defs)
      if (d.is_object()) s.metric_definitions.push_back({StringOr(d, "Name"), StringOr(d, "Regex")});
  s.hyperparameters = StringMap(req, "HyperParameters");
  s.environment = StringMap(req, "Environment");
  if (const json& channels = Member(req, "InputDataConfig"); channels.is_array())
    for (const auto& ch : channels) {
      if (!ch.is_object()) continue;
      TrainingSpec::Channel c;
      c.name = StringOr(ch, "ChannelName");
      c.content_type = StringOr(ch, "ContentType");
      c.input_mode = StringOr(ch, "InputMode");
      c.record_wrapper = StringOr(ch, "RecordWrapperType", "None");
      const json& ds = Member(ch, "DataSource");
      if (const json& f = Member(ds, "FileSystemDataSource"); f.is_object()) {
        c.file_system = TrainingSpec::FileSystemSource{StringOr(f, "FileSystemId"), StringOr(f, "DirectoryPath", "/"),
                                                       StringOr(f, "FileSystemAccessMode", "ro") == "ro"};
      } else {
        const json& s3 = Member(ds, "S3DataSource");
        c.s3_uri = StringOr(s3, "S3Uri");
        c.s3_data_type = StringOr(s3, "S3DataType", "S3Prefix");
        c.distribution = StringOr(s3, "S3DataDistributionType", "FullyReplicated");
        c.shuffle_seed = OptionalInt(Member(ch, "ShuffleConfig"), "Seed");
      }
      s.channels.push_back(std::move(c));
    }
  const json& output = Member(req, "OutputDataConfig");
  s.s3_output_path = StringOr(output, "S3OutputPath");
  s.compressed_output = StringOr(output, "CompressionType", "GZIP") != "NONE";
  if (const json& ck = Member(req, "CheckpointConfig"); ck.is_object())
    s.checkpoint = TrainingSpec::Checkpoint{StringOr(ck, "S3Uri"), StringOr(ck, "LocalPath", "/opt/ml/checkpoints")};
  const json& rc = Member(req, "ResourceConfig");
  s.instance_type = StringOr(rc, "InstanceType");
  s.instance_count = IntOr(rc, "InstanceCount", 1);
  s.volume_size_gb = OptionalInt(rc, "VolumeSizeInGB");
  s.volume_kms_key_id = StringOr(rc, "VolumeKmsKeyId");
  s.keep_alive_seconds = IntOr(rc, "KeepAlivePeriodInSeconds", 0);
  const json& vpc = Member(req, "VpcConfig");
  s.security_group_ids = Strings(vpc, "SecurityGroupIds");
  s.subnets = Strings(vpc, "Subnets");
  std::sort(s.security_group_ids.begin(), s.security_group_ids.end());
  std::sort(s.subnets.begin(), s.subnets.end());
  s.network_isolation = BoolOr(req, "EnableNetworkIsolation", false);
  s.inter_container_traffic_encryption = BoolOr(req, "EnableInterContainerTrafficEncryption", false);
  const json& stopping = Member(req, "StoppingCondition");
  s.max_runtime_seconds = IntOr(stopping, "MaxRuntimeInSeconds", 0);
  s.max_wait_seconds = IntOr(stopping, "MaxWaitTimeInSeconds", 0);
  s.max_pending_seconds = IntOr(stopping, "MaxPendingTimeInSeconds", 0);
  s.managed_spot = BoolOr(req, "EnableManagedSpotTraining", false);
  s.max_retry_attempts = IntOr(Member(req, "RetryStrategy"), "MaximumRetryAttempts", 0);
  if (const json& tags = Member(req, "Tags"); tags.is_array())
    for (const auto& t : tags)
      if (t.is_object() && Member(t, "Key").is_string() && (Member(t, "Value").is_string() || Member(t, "Value").is_null()))
        s.tags[t["Key"].get<std::string>()] = StringOr(t, "Value");
  *out = std::move(s);
  return true;
}

bool DecodeTrainingSpec(const std::string& request_json, TrainingSpec* out) {
  return DecodeTrainingSpec(request_json.empty() ? json::object() : json::parse(request_json, nullptr, false), out);
}

json EncodeTrainingSpec(const TrainingSpec& s) {
  json j = json::object();
  if (!s.training_job_name.empty()) j["TrainingJobName"] = s.training_job_name;
  if (!s.role_arn.empty()) j["RoleArn"] = s.role_arn;
  json alg = json::object();
  if (!s.training_image.empty()) alg["TrainingImage"] = s.training_image;
  alg["TrainingInputMode"] = s.training_input_mode;
  if (!s.container_entrypoint.empty()) alg["ContainerEntrypoint"] = s.container_entrypoint;
  if (!s.container_arguments.empty()) alg["ContainerArguments"] = s.container_arguments;
  if (!s.metric_definitions.empty()) {
    json defs = json::array();
    for (const auto& d : s.metric_definitions) defs.push_back({{"Name", d.name}, {"Regex", d.regex}});
    alg["MetricDefinitions"] = defs;
  }
  j["AlgorithmSpecification"] = alg;
  if (!s.hyperparameters.empty()) j["HyperParameters"] = s.hyperparameters;
  if (!s.environment.empty()) j["Environment"] = s.environment;
  if (!s.channels.empty()) {
    json channels = json::array();
    for (const auto& c : s.channels) {
      json ch = {{"ChannelName", c.name}, {"RecordWrapperType", c.record_wrapper}};
      if (!c.content_type.empty()) ch["ContentType"] = c.content_type;
      if (!c.input_mode.empty()) ch["InputMode"] = c.input_mode;
      if (c.file_system) {
        ch["DataSource"]["FileSystemDataSource"] = {{"FileSystemId", c.file_system->id},
                                                    {"DirectoryPath", c.file_system->directory_path},
                                                    {"FileSystemAccessMode", c.file_system->read_only ? "ro" : "rw"}};
      } else {
        ch["DataSource"]["S3DataSource"] = {{"S3Uri", c.s3_uri}, {"S3DataType", c.s3_data_type},
                                           {"S3DataDistributionType", c.distribution}};
        if (c.shuffle_seed) ch["ShuffleConfig"] = {{"Seed", *c.shuffle_seed}};
      }
      channels.push_back(std::move(ch));
    }
    j["InputDataConfig"] = channels;
  }
  j["OutputDataConfig"] = {{"S3OutputPath", s.s3_output_path}, {"CompressionType", s.compressed_output ? "GZIP" : "NONE"}};
  if (s.checkpoint) j["CheckpointConfig"] = {{"S3Uri", s.checkpoint->s3_uri}, {"LocalPath", s.checkpoint->local_path}};
  json rc = {{"InstanceType", s.instance_type}, {"InstanceCount", s.instance_count}};
  if (s.volume_size_gb) rc["VolumeSizeInGB"] = *s.volume_size_gb;
  if (!s.volume_kms_key_id.empty()) rc["VolumeKmsKeyId"] = s.volume_kms_key_id;
  if (s.keep_alive_seconds) rc["KeepAlivePeriodInSeconds"] = s.keep_alive_seconds;
  j["ResourceConfig"] = rc;
  if (!s.security_group_ids.empty() || !s.subnets.empty())
    j["VpcConfig"] = {{"SecurityGroupIds", s.security_group_ids}, {"Subnets", s.subnets}};
  if (s.network_isolation) j["EnableNetworkIsolation"] = true;
  if (s.inter_container_traffic_encryption) j["EnableInterContainerTrafficEncryption"] = true;
  if (s.managed_spot) j["EnableManagedSpotTraining"] = true;
  json stopping = json::object();
  if (s.max_runtime_seconds) stopping["MaxRuntimeInSeconds"] = s.max_runtime_seconds;
  if (s.max_wait_seconds) stopping["MaxWaitTimeInSeconds"] = s.max_wait_seconds;
  if (s.max_pending_seconds) stopping["MaxPendingTimeInSeconds"] = s.max_pending_seconds;
  if (!stopping.empty()) j["StoppingCondition"] = stopping;
  if (s.max_retry_attempts) j["RetryStrategy"] = {{"MaximumRetryAttempts", s.max_retry_attempts}};
  if (!s.tags.empty()) j["Tags"] = TagList(s.tags);
  return j;
}

json EchoTrainingRequest(json request, const TrainingSpec& spec) {
  TrainingSpec given;
  if (!DecodeTrainingSpec(request, &given) || given == spec) return request;
  if (given.training_job_name != spec.training_job_name) request["TrainingJobName"] = spec.training_job_name;
  if (given.hyperparameters != spec.hyperparameters) {
    json& hps = request["HyperParameters"];
    if (!hps.is_object()) hps = json::object();
    for (const auto& [k, v] : spec.hyperparameters) {
      auto it = given.hyperparameters.find(k);
      if (it == given.hyperparameters.end() || it->second != v) hps[k] = v;
    }
    for (const auto& [k, v] : given.hyperparameters)
      if (!spec.hyperparameters.count(k)) hps.erase(k);
  }
  if (given.checkpoint != spec.checkpoint && spec.checkpoint) {
    if (!request["CheckpointConfig"].is_object()) request["CheckpointConfig"] = json::object();
    request["CheckpointConfig"]["S3Uri"] = spec.checkpoint->s3_uri;
  }
  auto resource = [&]() -> json& {
    json& rc = request["ResourceConfig"];
    if (!rc.is_object()) rc = json::object();
    return rc;
  };
  if (given.instance_type != spec.instance_type) resource()["InstanceType"] = spec.instance_type;
  if (given.keep_alive_seconds != spec.keep_alive_seconds) resource()["KeepAlivePeriodInSeconds"] = spec.keep_alive_seconds;
  if (given.managed_spot != spec.managed_spot) request["EnableManagedSpotTraining"] = spec.managed_spot;
  if (given.max_wait_seconds != spec.max_wait_seconds) {
    json& sc = request["StoppingCondition"];
    if (!sc.is_object()) sc = json::object();
    if (spec.max_wait_seconds) sc["MaxWaitTimeInSeconds"] = spec.max_wait_seconds;
    else sc.erase("MaxWaitTimeInSeconds");
  }
  if (given.tags != spec.tags) request["Tags"] = TagList(spec.tags);
  return request;
}

std::string UnquoteHyperParameter(const std::string& v) {
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') return v;
  std::string out;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    const char c = v[i];
    if (c == '"' || static_cast<unsigned char>(c) < 0x20) return v;  // not one JSON string literal
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i + 1 >= v.size()) return v;
    switch (v[i]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto cp = Hex4(v, i + 1);
        if (!cp || i + 5 > v.size() - 1) return v;
        i += 4;
        if (*cp >= 0xD800 && *cp < 0xDC00) {  // a surrogate pair: \uD8xx\uDCxx
          auto low = i + 6 < v.size() && v[i + 1] == '\\' && v[i + 2] == 'u' ? Hex4(v, i + 3) : std::nullopt;
          if (!low || *low < 0xDC00 || *low >= 0xE000) return v;
          cp = 0x10000 + ((*cp - 0xD800) << 10) + (*low - 0xDC00);
          i += 6;
        } else if (*cp >= 0xDC00 && *cp < 0xE000) {
          return v;
        }
        AppendUtf8(out, *cp);
        break;
      }
      default: return v;
    }
  }
  return out;
}

std::string WarmPoolMatchKey(const TrainingSpec& s, const std::string& owner) {
  json key = json::array({owner, s.role_arn, s.instance_type, s.instance_count, s.volume_kms_key_id,
                          s.volume_size_gb.value_or(0), s.security_group_ids, s.subnets,
                          s.inter_container_traffic_encryption, s.network_isolation});
  return key.dump();
}

}  // namespace ty
