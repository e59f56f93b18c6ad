// Client subcommands: call, submit, jobs, describe, wait, logs, stop, snapshot, costs, what-if, admin.
#include <CLI/CLI.hpp>
#include <array>
#include <cctype>
#include <ctime>
#include <tuple>
#include <map>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/cli.h"
#include "cli/client.h"
#include "core/clock.h"
#include "core/strings.h"

namespace ty::cli {

using nlohmann::json;

namespace {

struct Common {
  ClientOptions client;
  bool as_json = false;
};

void AddCommon(CLI::App* cmd, Common& c) {
  cmd->add_option("--endpoint-url", c.client.endpoint, "Server URL (default $TRAINYARD_ENDPOINT_URL or http://127.0.0.1:8080)");
  cmd->add_option("--data-dir", c.client.data_dir, "Server data directory, for its credentials file when AWS_ACCESS_KEY_ID is unset (default $TRAINYARD_DATA_DIR or ./trainyard-data)");
  cmd->add_option("--region", c.client.region, "Region to sign for (default $AWS_REGION or us-east-1)");
  cmd->add_option("--ca-bundle", c.client.ca_bundle,
                  "PEM file of the certificates to trust for an https:// endpoint (default $AWS_CA_BUNDLE, else the "
                  "system's and the data directory's self-signed tls/certificate.pem, if any)");
  cmd->add_flag("--json", c.as_json, "Print the raw JSON answer");
}

int Fail(const Status& st) {
  std::fprintf(stderr, "trainyard: %s\n", st.message().c_str());
  return 1;
}

// "file://path" or "@path" reads a file; anything else is the text itself.
StatusOr<std::string> TextArg(const std::string& v) {
  std::string path;
  if (StartsWith(v, "file://")) path = v.substr(7);
  else if (StartsWith(v, "@")) path = v.substr(1);
  else return v;
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string FormatMs(int64_t ms) {
  if (!ms) return "-";
  std::string iso = FormatIso8601(ms);
  return iso.substr(0, 10) + " " + iso.substr(11, 8);
}

void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(w[i] - r[i].size() + 2, ' ');
    }
    std::printf("%s\n", out.c_str());
  };
  line(header);
  for (const auto& r : rows) line(r);
}

// A time given on the command line: ISO-8601 in UTC ("2026-05-01", "2026-05-01T12:00:00Z", with
// optional seconds and fraction) or an age before `now_ms` ("90s", "15m", "2h", "7d").
StatusOr<int64_t> ParseWhen(const std::string& text, int64_t now_ms) {
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0])) && text.find('-') == std::string::npos) {
    size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const std::string unit = text.substr(used);
    const int64_t scale = unit == "s" ? 1000 : unit == "m" ? 60000 : unit == "h" ? 3600000 : unit == "d" ? 86400000 : 0;
    if (used == 0 || scale == 0 || n < 0 || n > 100LL * 365 * 86400)
      return InvalidArgument("'" + text + "' is not an age (90s, 15m, 2h, 7d) or an ISO-8601 time");
    return now_ms - n * scale;
  }
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double sec = 0;
  char tail = 0;
  const int n = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf%c", &y, &mo, &d, &h, &mi, &sec, &tail);
  const bool date_only = n == 3 && text.size() == 10;
  if (!(date_only || ((n == 5 || n == 7) && text.back() == 'Z' && (n == 5 || tail == 'Z'))) || mo < 1 || mo > 12 ||
      d < 1 || d > 31 || h > 23 || mi > 59 || sec < 0 || sec >= 61)
    return InvalidArgument("'" + text + "' is not an age (90s, 15m, 2h, 7d) or an ISO-8601 time in UTC "
                           "(2026-05-01, 2026-05-01T12:00:00Z)");
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + static_cast<int64_t>(sec * 1000);
}

bool LooksLikeJobId(const std::string& s) {
  return s.size() == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-';
}

template <typename F>
std::function<int()> WithClient(Common& common, F body) {
  return [&common, body]() -> int {
    auto client = Client::Connect(common.client);
    if (!client.ok()) return Fail(client.status());
    return body(**client);
  };
}

// The latest training job of a service job id, or the name itself.
StatusOr<std::string> TrainingJobOf(Client& c, const std::string& id) {
  if (!LooksLikeJobId(id)) return id;
  auto d = c.Call("batch", "DescribeServiceJob", {{"jobId", id}});
  if (!d.ok()) return d.status();
  if (!d->contains("latestAttempt")) return FailedPrecondition("service job " + id + " has not started an attempt yet");
  std::string arn = (*d)["latestAttempt"]["serviceResourceId"]["value"];
  return arn.substr(arn.rfind('/') + 1);  // lower-cased like AWS's; names are found regardless of case
}

// `trainyard admin user|key|policy|role ...`: users, access keys, managed policies and roles
// (POST /trainyard/v1/admin/iam/<Operation>; docs/security.md, "Users and keys").
void AddIamCommands(CLI::App* admin, Common& common, std::function<int()>& run) {
  auto post = [&common](const std::string& op, json body, std::function<void(const json&)> print) {
    return WithClient(common, [op, body, print, &common](Client& c) {
      auto out = c.Post("sagemaker", "/trainyard/v1/admin/iam/" + op, body);
      if (!out.ok()) return Fail(out.status());
      if (common.as_json) std::printf("%s\n", out->dump(2).c_str());
      else print(*out);
      return 0;
    });
  };
  auto tags_of = [](const std::vector<std::string>& pairs) -> StatusOr<json> {
    json tags = json::array();
    for (const auto& p : pairs) {
      auto eq = p.find('=');
      if (eq == std::string::npos || eq == 0) return InvalidArgument("a tag is KEY=VALUE, not '" + p + "'");
      tags.push_back({{"Key", p.substr(0, eq)}, {"Value", p.substr(eq + 1)}});
    }
    return tags;
  };
  auto tag_text = [](const json& tags) {
    std::string s;
    for (const auto& t : tags) s += (s.empty() ? "" : ",") + t["Key"].get<std::string>() + "=" + t["Value"].get<std::string>();
    return s.empty() ? std::string("-") : s;
  };
  static std::string name, user, document, description;
  static std::vector<std::string> tags, remove;

  auto* users = admin->add_subcommand("user", "Users: each has tags (team=a), access keys and attached policies.");
  users->require_subcommand(1);
  {
    auto* cmd = users->add_subcommand("create", "Create a user (arn:aws:iam::ACCOUNT:user/NAME).");
    cmd->add_option("name", name, "User name: 1-64 letters, digits and +=,.@_-")->required();
    cmd->add_option("--tag", tags, "A tag KEY=VALUE (repeatable), e.g. --tag team=a: aws:PrincipalTag/KEY in policies");
    AddCommon(cmd, common);
    cmd->callback([&run, post, tags_of] {
      auto t = tags_of(tags);
      if (!t.ok()) { run = [st = t.status()] { return Fail(st); }; return; }
      run = post("CreateUser", {{"UserName", name}, {"Tags", *t}},
                 [](const json& out) { std::printf("%s\n", out["User"]["Arn"].get<std::string>().c_str()); });
    });
  }
  {
    auto* cmd = users->add_subcommand("list", "List users with their tags and attached policies.");
    AddCommon(cmd, common);
    cmd->callback([&run, post, tag_text] {
      run = post("ListUsers", json::object(), [tag_text](const json& out) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& u : out["Users"]) {
          std::string policies;
          for (const auto& p : u["AttachedPolicies"]) policies += (policies.empty() ? "" : ",") + p.get<std::string>();
          rows.push_back({u["UserName"], tag_text(u["Tags"]), policies.empty() ? "-" : policies, u["Arn"]});
        }
        PrintTable({"USER", "TAGS", "POLICIES", "ARN"}, rows);
      });
    });
  }
  {
    auto* cmd = users->add_subcommand("delete", "Delete a user (its keys must be deleted and its policies detached first).");
    cmd->add_option("name", name, "User name")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      run = post("DeleteUser", {{"UserName", name}}, [](const json&) { std::printf("deleted user %s\n", name.c_str()); });
    });
  }
  {
    auto* cmd = users->add_subcommand("tag", "Add or replace tags of a user, or remove some (--remove KEY).");
    cmd->add_option("name", name, "User name")->required();
    cmd->add_option("tags", tags, "Tags KEY=VALUE to add or replace");
    cmd->add_option("--remove", remove, "A tag key to remove (repeatable)");
    AddCommon(cmd, common);
    cmd->callback([&run, &common, post, tags_of, tag_text] {
      auto t = tags_of(tags);
      if (!t.ok()) { run = [st = t.status()] { return Fail(st); }; return; }
      if (t->empty() && remove.empty()) { run = [] { return Fail(InvalidArgument("name a tag KEY=VALUE or --remove KEY")); }; return; }
      auto print = [tag_text](const json& out) { std::printf("%s\n", tag_text(out["User"]["Tags"]).c_str()); };
      if (!remove.empty() && t->empty()) {
        run = post("UntagUser", {{"UserName", name}, {"TagKeys", remove}}, print);
      } else if (remove.empty()) {
        run = post("TagUser", {{"UserName", name}, {"Tags", *t}}, print);
      } else {
        json tagged = *t;
        run = WithClient(common, [tagged, print, &common](Client& c) {
          auto a = c.Post("sagemaker", "/trainyard/v1/admin/iam/UntagUser", {{"UserName", name}, {"TagKeys", remove}});
          if (!a.ok()) return Fail(a.status());
          auto b = c.Post("sagemaker", "/trainyard/v1/admin/iam/TagUser", {{"UserName", name}, {"Tags", tagged}});
          if (!b.ok()) return Fail(b.status());
          if (common.as_json) std::printf("%s\n", b->dump(2).c_str());
          else print(*b);
          return 0;
        });
      }
    });
  }

  auto* keys = admin->add_subcommand("key", "Access keys: a user signs requests with one (at most two per user).");
  keys->require_subcommand(1);
  {
    auto* cmd = keys->add_subcommand("create", "Create an access key for a user and print its id and secret. The secret "
                                               "is shown this once: store it now (aws configure, or a credentials file).");
    cmd->add_option("user", user, "User name")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      run = post("CreateAccessKey", {{"UserName", user}}, [](const json& out) {
        std::printf("aws_access_key_id = %s\naws_secret_access_key = %s\n", out["AccessKey"]["AccessKeyId"].get<std::string>().c_str(),
                    out["AccessKey"]["SecretAccessKey"].get<std::string>().c_str());
      });
    });
  }
  {
    auto* cmd = keys->add_subcommand("list", "List access key ids (never their secrets), of one user or of all.");
    cmd->add_option("user", user, "User name (default: every user)");
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      json body = json::object();
      if (!user.empty()) body["UserName"] = user;
      run = post("ListAccessKeys", body, [](const json& out) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& k : out["AccessKeyMetadata"])
          rows.push_back({k["AccessKeyId"], k["UserName"], FormatMs(static_cast<int64_t>(k["CreateDate"].get<double>() * 1000))});
        PrintTable({"ACCESS KEY ID", "USER", "CREATED"}, rows);
      });
    });
  }
  {
    auto* cmd = keys->add_subcommand("delete", "Delete an access key: requests signed with it are refused from now on.");
    cmd->add_option("access-key-id", name, "The key's id (AKIA...)")->required();
    cmd->add_option("--user", user, "The user that holds it (checked when given)");
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      json body = {{"AccessKeyId", name}};
      if (!user.empty()) body["UserName"] = user;
      run = post("DeleteAccessKey", body, [](const json&) { std::printf("deleted access key %s\n", name.c_str()); });
    });
  }

  auto* policies = admin->add_subcommand("policy", "Managed policies: IAM policy documents attached to users "
                                                   "(docs/security.md, \"Policies\").");
  policies->require_subcommand(1);
  {
    auto* cmd = policies->add_subcommand("create", "Create a managed policy from a document (checked whole: a malformed "
                                                   "one is refused, naming the field and the rule).");
    cmd->add_option("name", name, "Policy name: 1-128 letters, digits and +=,.@_-")->required();
    cmd->add_option("document", document, "The policy's JSON: text, file://PATH or @PATH")->required();
    cmd->add_option("--description", description, "What the policy is for");
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      auto text = TextArg(document);
      if (!text.ok()) { run = [st = text.status()] { return Fail(st); }; return; }
      json body = {{"PolicyName", name}, {"PolicyDocument", *text}};
      if (!description.empty()) body["Description"] = description;
      run = post("CreatePolicy", body, [](const json& out) { std::printf("%s\n", out["Policy"]["Arn"].get<std::string>().c_str()); });
    });
  }
  {
    auto* cmd = policies->add_subcommand("list", "List managed policies and how many users each is attached to.");
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      run = post("ListPolicies", json::object(), [](const json& out) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& p : out["Policies"])
          rows.push_back({p["PolicyName"], std::to_string(p["AttachmentCount"].get<int64_t>()), p["Arn"]});
        PrintTable({"POLICY", "ATTACHED", "ARN"}, rows);
      });
    });
  }
  {
    auto* cmd = policies->add_subcommand("get", "Print a managed policy's document.");
    cmd->add_option("name", name, "Policy name or ARN")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      json body = StartsWith(name, "arn:") ? json{{"PolicyArn", name}} : json{{"PolicyName", name}};
      run = post("GetPolicy", body, [](const json& out) {
        json doc = json::parse(out["Policy"]["PolicyDocument"].get<std::string>(), nullptr, false);
        std::printf("%s\n", doc.is_discarded() ? out["Policy"]["PolicyDocument"].get<std::string>().c_str() : doc.dump(2).c_str());
      });
    });
  }
  {
    auto* cmd = policies->add_subcommand("delete", "Delete a managed policy (detach it from every user first).");
    cmd->add_option("name", name, "Policy name or ARN")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      json body = StartsWith(name, "arn:") ? json{{"PolicyArn", name}} : json{{"PolicyName", name}};
      run = post("DeletePolicy", body, [](const json&) { std::printf("deleted policy %s\n", name.c_str()); });
    });
  }
  for (const char* verb : {"attach", "detach"}) {
    const bool attach = std::string(verb) == "attach";
    auto* cmd = policies->add_subcommand(verb, attach ? "Attach a managed policy to a user: it applies to the user's next request."
                                                      : "Detach a managed policy from a user.");
    cmd->add_option("name", name, "Policy name or ARN")->required();
    cmd->add_option("--user", user, "User name")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post, attach] {
      json body = StartsWith(name, "arn:") ? json{{"PolicyArn", name}} : json{{"PolicyName", name}};
      body["UserName"] = user;
      run = post(attach ? "AttachUserPolicy" : "DetachUserPolicy", body, [attach](const json&) {
        std::printf("%s %s %s user %s\n", attach ? "attached" : "detached", name.c_str(), attach ? "to" : "from", user.c_str());
      });
    });
  }

  static std::string policy;
  auto* roles = admin->add_subcommand("role", "Roles: what a job may call back into trainyard with, named by its "
                                              "RoleArn (docs/security.md, \"Roles for jobs\").");
  roles->require_subcommand(1);
  {
    auto* cmd = roles->add_subcommand("create", "Create a role and print its ARN, for a job's RoleArn. Once the account has "
                                                "a role, every new job must name one, and its submitter needs iam:PassRole on it.");
    cmd->add_option("name", name, "Role name: 1-64 letters, digits and +=,.@_-")->required();
    cmd->add_option("--description", description, "What the role is for");
    cmd->add_option("--trust-policy", document,
                    "Its trust policy (AssumeRolePolicyDocument): text, file://PATH or @PATH. Without one it admits the "
                    "account's principals and the job services (docs/security.md, \"Trust policies\")");
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      json body = {{"RoleName", name}};
      if (!description.empty()) body["Description"] = description;
      if (!document.empty()) {
        auto text = TextArg(document);
        if (!text.ok()) {
          run = [st = text.status()] { return Fail(st); };
          return;
        }
        body["AssumeRolePolicyDocument"] = *text;
      }
      run = post("CreateRole", body, [](const json& out) { std::printf("%s\n", out["Role"]["Arn"].get<std::string>().c_str()); });
    });
  }
  {
    auto* cmd = roles->add_subcommand("trust", "Replace a role's trust policy (UpdateAssumeRolePolicy).");
    cmd->add_option("name", name, "Role name")->required();
    cmd->add_option("document", document, "The trust policy's JSON: text, file://PATH or @PATH")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      auto text = TextArg(document);
      if (!text.ok()) {
        run = [st = text.status()] { return Fail(st); };
        return;
      }
      run = post("UpdateAssumeRolePolicy", {{"RoleName", name}, {"PolicyDocument", *text}},
                 [](const json&) { std::printf("updated the trust policy of role %s\n", name.c_str()); });
    });
  }
  {
    auto* cmd = roles->add_subcommand("list", "List roles and their attached policies.");
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      run = post("ListRoles", json::object(), [](const json& out) {
        std::vector<std::vector<std::string>> rows;
        for (const auto& r : out["Roles"]) {
          std::string attached;
          for (const auto& p : r["AttachedPolicies"]) attached += (attached.empty() ? "" : ",") + p.get<std::string>();
          rows.push_back({r["RoleName"], attached.empty() ? "-" : attached, r["Arn"]});
        }
        PrintTable({"ROLE", "POLICIES", "ARN"}, rows);
      });
    });
  }
  {
    auto* cmd = roles->add_subcommand("get", "Print a role.");
    cmd->add_option("name", name, "Role name")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      run = post("GetRole", {{"RoleName", name}}, [](const json& out) { std::printf("%s\n", out["Role"].dump(2).c_str()); });
    });
  }
  {
    auto* cmd = roles->add_subcommand("delete", "Delete a role (detach its policies first).");
    cmd->add_option("name", name, "Role name")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post] {
      run = post("DeleteRole", {{"RoleName", name}}, [](const json&) { std::printf("deleted role %s\n", name.c_str()); });
    });
  }
  for (const char* verb : {"attach", "detach"}) {
    const bool attach = std::string(verb) == "attach";
    auto* cmd = roles->add_subcommand(verb, attach ? "Attach a managed policy to a role." : "Detach a managed policy from a role.");
    cmd->add_option("name", name, "Role name")->required();
    cmd->add_option("policy", policy, "Policy name or ARN")->required();
    AddCommon(cmd, common);
    cmd->callback([&run, post, attach] {
      json body = StartsWith(policy, "arn:") ? json{{"PolicyArn", policy}} : json{{"PolicyName", policy}};
      body["RoleName"] = name;
      run = post(attach ? "AttachRolePolicy" : "DetachRolePolicy", body, [attach](const json&) {
        std::printf("%s %s %s role %s\n", attach ? "attached" : "detached", policy.c_str(), attach ? "to" : "from", name.c_str());
      });
    });
  }
}

}  // namespace

void AddClientCommands(CLI::App& app, std::function<int()>& run) {
  static Common common;

  // ---- call ----
  {
    auto* cmd = app.add_subcommand("call", "Call any supported API operation with a JSON body, e.g.\n"
                                           "  trainyard call batch CreateJobQueue file://queue.json\n"
                                           "  trainyard call trainyard QueueStandings '{\"JobQueue\": \"q\"}'");
    static std::string service, operation, body = "{}";
    cmd->add_option("service", service, "batch, sagemaker or trainyard (its own operations: docs/api-coverage.md)")->required();
    cmd->add_option("operation", operation, "Operation name, e.g. DescribeJobQueues")->required();
    cmd->add_option("body", body, "JSON text, file://PATH or @PATH (default {})");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        auto text = TextArg(body);
        if (!text.ok()) return Fail(text.status());
        json j = json::parse(*text, nullptr, false);
        if (j.is_discarded()) return Fail(InvalidArgument("body is not valid JSON"));
        auto out = c.Call(service, operation, j);
        if (!out.ok()) return Fail(out.status());
        std::printf("%s\n", out->dump(2).c_str());
        return 0;
      });
    });
  }

  // ---- submit ----
  {
    auto* cmd = app.add_subcommand("submit", "Submit a SageMaker training job to a job queue (SubmitServiceJob).");
    static std::string queue, name, payload, share, token;
    static int priority = -1;
    cmd->add_option("--queue,-q", queue, "Job queue name or ARN")->required();
    cmd->add_option("--name,-n", name, "Job name (default: the payload's TrainingJobName)");
    cmd->add_option("--payload,-p", payload, "CreateTrainingJob request: JSON text, file://PATH or @PATH")->required();
    cmd->add_option("--priority", priority, "schedulingPriority (0..9999)");
    cmd->add_option("--share", share, "shareIdentifier (fair-share queues)");
    cmd->add_option("--client-token", token, "Idempotency token");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        auto text = TextArg(payload);
        if (!text.ok()) return Fail(text.status());
        json p = json::parse(*text, nullptr, false);
        if (p.is_discarded()) return Fail(InvalidArgument("--payload is not valid JSON"));
        json req = {{"jobName", name.empty() ? p.value("TrainingJobName", "job") : name},
                    {"jobQueue", queue},
                    {"serviceJobType", "SAGEMAKER_TRAINING"},
                    {"serviceRequestPayload", p.dump()}};
        if (priority >= 0) req["schedulingPriority"] = priority;
        if (!share.empty()) req["shareIdentifier"] = share;
        if (!token.empty()) req["clientToken"] = token;
        auto out = c.Call("batch", "SubmitServiceJob", req);
        if (!out.ok()) return Fail(out.status());
        if (common.as_json) std::printf("%s\n", out->dump(2).c_str());
        else std::printf("%s\n", (*out)["jobId"].get<std::string>().c_str());
        return 0;
      });
    });
  }

  // ---- jobs ----
  {
    auto* cmd = app.add_subcommand("jobs", "List a queue's service jobs (all statuses unless --status is given).");
    static std::string queue, status;
    cmd->add_option("--queue,-q", queue, "Job queue name or ARN")->required();
    cmd->add_option("--status,-s", status, "Only this status (SUBMITTED, RUNNABLE, SCHEDULED, STARTING, RUNNING, SUCCEEDED, FAILED)");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        std::vector<std::string> statuses = {"SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"};
        if (!status.empty()) statuses = {ToUpper(status)};
        json all = json::array();
        for (const auto& s : statuses) {
          std::string next;
          do {
            json req = {{"jobQueue", queue}, {"jobStatus", s}, {"maxResults", 100}};
            if (!next.empty()) req["nextToken"] = next;
            auto out = c.Call("batch", "ListServiceJobs", req);
            if (!out.ok()) return Fail(out.status());
            for (auto& j : (*out)["jobSummaryList"]) all.push_back(j);
            next = out->value("nextToken", "");
          } while (!next.empty());
        }
        if (common.as_json) {
          std::printf("%s\n", all.dump(2).c_str());
          return 0;
        }
        std::vector<std::vector<std::string>> rows;
        for (auto& j : all)
          rows.push_back({j.value("jobId", ""), j.value("jobName", ""), j.value("status", ""),
                          FormatMs(j.value("createdAt", int64_t{0})), FormatMs(j.value("startedAt", int64_t{0})),
                          FormatMs(j.value("stoppedAt", int64_t{0})), j.value("statusReason", "")});
        PrintTable({"JOB ID", "NAME", "STATUS", "CREATED", "STARTED", "STOPPED", "REASON"}, rows);
        return 0;
      });
    });
  }

  // ---- describe ----
  {
    auto* cmd = app.add_subcommand("describe", "Describe a service job (by job id) or a training job (by name).");
    static std::string id;
    cmd->add_option("id", id, "Service job id or training job name")->required();
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        bool service = LooksLikeJobId(id);
        auto out = service ? c.Call("batch", "DescribeServiceJob", {{"jobId", id}})
                           : c.Call("sagemaker", "DescribeTrainingJob", {{"TrainingJobName", id}});
        if (!out.ok()) return Fail(out.status());
        if (common.as_json) {
          std::printf("%s\n", out->dump(2).c_str());
          return 0;
        }
        const json& j = *out;
        if (service) {
          std::printf("job:        %s (%s)\nqueue:      %s\nstatus:     %s\n", j.value("jobName", "").c_str(),
                      j.value("jobId", "").c_str(), j.value("jobQueue", "").c_str(), j.value("status", "").c_str());
          if (j.contains("statusReason")) std::printf("reason:     %s\n", j["statusReason"].get<std::string>().c_str());
          if (j.contains("trainyardWaitReason")) std::printf("waiting:    %s\n", j["trainyardWaitReason"].get<std::string>().c_str());
          std::printf("history:   ");
          for (auto& h : j.value("trainyardStatusHistory", json::array()))
            std::printf(" %s@%s", h["status"].get<std::string>().c_str(), FormatMs(h["at"]).c_str());
          std::printf("\nattempts:\n");
          for (auto& a : j.value("attempts", json::array()))
            std::printf("  %s  %s\n", a["serviceResourceId"]["value"].get<std::string>().c_str(), a.value("statusReason", "").c_str());
        } else {
          std::printf("training job: %s\nstatus:       %s / %s\n", j.value("TrainingJobName", "").c_str(),
                      j.value("TrainingJobStatus", "").c_str(), j.value("SecondaryStatus", "").c_str());
          if (j.contains("FailureReason")) std::printf("failure:      %s\n", j["FailureReason"].get<std::string>().c_str());
          std::printf("model:        %s\n", j["ModelArtifacts"].value("S3ModelArtifacts", "").c_str());
          if (j.contains("WarmPoolStatus")) {
            const json& w = j["WarmPoolStatus"];
            std::printf("warm pool:    %s, retained %llds", w.value("Status", "").c_str(),
                        static_cast<long long>(w.value("ResourceRetainedBillableTimeInSeconds", int64_t{0})));
            if (w.contains("ReusedByJob")) std::printf(", reused by %s", w["ReusedByJob"].get<std::string>().c_str());
            if (j.contains("WarmPoolEndReason")) std::printf(" (%s)", j["WarmPoolEndReason"].get<std::string>().c_str());
            std::printf("\n");
          }
          for (auto& t : j.value("SecondaryStatusTransitions", json::array()))
            std::printf("  %-20s %s\n", t.value("Status", "").c_str(), t.value("StatusMessage", "").c_str());
          for (auto& m : j.value("FinalMetricDataList", json::array()))
            std::printf("metric %s = %g\n", m.value("MetricName", "").c_str(), m.value("Value", 0.0));
        }
        return 0;
      });
    });
  }

  // ---- tune ---- (docs/tuning.md)
  {
    auto* cmd = app.add_subcommand("tune",
                                   "Describe a hyperparameter tuning job and list its trials (best objective first), or "
                                   "list the tuning jobs when no name is given.");
    static std::string name;
    cmd->add_option("name", name, "Hyperparameter tuning job name");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        if (name.empty()) {
          auto out = c.Call("sagemaker", "ListHyperParameterTuningJobs", {{"MaxResults", 100}});
          if (!out.ok()) return Fail(out.status());
          if (common.as_json) {
            std::printf("%s\n", out->dump(2).c_str());
            return 0;
          }
          std::vector<std::vector<std::string>> rows;
          for (const auto& t : (*out)["HyperParameterTuningJobSummaries"]) {
            const json& counters = t["TrainingJobStatusCounters"];
            rows.push_back({t.value("HyperParameterTuningJobName", ""), t.value("Strategy", ""),
                            t.value("HyperParameterTuningJobStatus", ""),
                            std::to_string(counters.value("Completed", 0)) + "/" + std::to_string(counters.value("InProgress", 0)) +
                                "/" + std::to_string(counters.value("Stopped", 0)) + "/" +
                                std::to_string(counters.value("NonRetryableError", 0))});
          }
          PrintTable({"TUNING JOB", "STRATEGY", "STATUS", "DONE/RUNNING/STOPPED/FAILED"}, rows);
          return 0;
        }
        auto d = c.Call("sagemaker", "DescribeHyperParameterTuningJob", {{"HyperParameterTuningJobName", name}});
        if (!d.ok()) return Fail(d.status());
        json trials = json::array();
        for (std::string token;;) {
          json req = {{"HyperParameterTuningJobName", name}, {"MaxResults", 100}, {"SortBy", "FinalObjectiveMetricValue"},
                      {"SortOrder", (*d)["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"].value("Type", "") == "Minimize"
                                        ? "Ascending" : "Descending"}};
          if (!token.empty()) req["NextToken"] = token;
          auto page = c.Call("sagemaker", "ListTrainingJobsForHyperParameterTuningJob", req);
          if (!page.ok()) return Fail(page.status());
          for (auto& t : (*page)["TrainingJobSummaries"]) trials.push_back(t);
          token = page->value("NextToken", "");
          if (token.empty()) break;
        }
        if (common.as_json) {
          std::printf("%s\n", json{{"TuningJob", *d}, {"Trials", trials}}.dump(2).c_str());
          return 0;
        }
        const json& j = *d;
        const json& config = j["HyperParameterTuningJobConfig"];
        const json& objective = config.value("HyperParameterTuningJobObjective", json::object());
        std::printf("tuning job: %s\nstatus:     %s\nstrategy:   %s (seed %lld), %s %s\n",
                    j.value("HyperParameterTuningJobName", "").c_str(), j.value("HyperParameterTuningJobStatus", "").c_str(),
                    config.value("Strategy", "").c_str(), static_cast<long long>(config.value("RandomSeed", int64_t{0})),
                    objective.value("Type", "").c_str(), objective.value("MetricName", "").c_str());
        if (j.contains("FailureReason")) std::printf("failure:    %s\n", j["FailureReason"].get<std::string>().c_str());
        if (j.contains("BestTrainingJob"))
          std::printf("best:       %s = %g\n", j["BestTrainingJob"].value("TrainingJobName", "").c_str(),
                      j["BestTrainingJob"]["FinalHyperParameterTuningJobObjectiveMetric"].value("Value", 0.0));
        std::vector<std::vector<std::string>> rows;
        for (const auto& t : trials) {
          std::string hps;
          const json tuned = t.value("TunedHyperParameters", json::object());
          for (const auto& [k, v] : tuned.items()) hps += (hps.empty() ? "" : " ") + k + "=" + v.get<std::string>();
          const json metric = t.value("FinalHyperParameterTuningJobObjectiveMetric", json::object());
          char value[32] = "-";
          if (metric.contains("Value")) std::snprintf(value, sizeof value, "%g", metric["Value"].get<double>());
          rows.push_back({t.value("TrainingJobName", ""), t.value("TrainingJobStatus", ""), t.value("ObjectiveStatus", ""), value, hps});
        }
        PrintTable({"TRIAL", "STATUS", "OBJECTIVE", "VALUE", "HYPERPARAMETERS"}, rows);
        return 0;
      });
    });
  }

  // ---- wait ----
  {
    auto* cmd = app.add_subcommand("wait", "Wait until service jobs finish, printing each status change.");
    static std::vector<std::string> ids;
    static int timeout = 600;
    cmd->add_option("ids", ids, "Service job ids")->required();
    cmd->add_option("--timeout", timeout, "Give up after this many seconds (default 600)");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        std::map<std::string, size_t> seen;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
        bool all_ok = true;
        while (true) {
          size_t done = 0;
          for (const auto& id : ids) {
            auto out = c.Call("batch", "DescribeServiceJob", {{"jobId", id}});
            if (!out.ok()) return Fail(out.status());
            auto history = out->value("trainyardStatusHistory", json::array());
            for (size_t i = seen[id]; i < history.size(); ++i)
              std::printf("%s  %-28s %s\n", FormatMs(history[i]["at"]).c_str(), out->value("jobName", id).c_str(),
                          history[i]["status"].get<std::string>().c_str());
            std::fflush(stdout);
            seen[id] = history.size();
            std::string st = out->value("status", "");
            if (st == "SUCCEEDED" || st == "FAILED") {
              ++done;
              if (st == "FAILED") all_ok = false;
            }
          }
          if (done == ids.size()) return all_ok ? 0 : 3;
          if (std::chrono::steady_clock::now() > deadline) return Fail(Unavailable("timed out waiting"));
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      });
    });
  }

  // ---- logs ----
  {
    auto* cmd = app.add_subcommand("logs", "Print a training job's log (by training job name or service job id).");
    static std::string id;
    static bool follow = false;
    static int instance = 1;
    cmd->add_option("id", id, "Training job name or service job id")->required();
    cmd->add_flag("-f,--follow", follow, "Keep printing new lines until the job ends");
    cmd->add_option("--instance", instance, "Instance number (algo-N), default 1");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        auto name = TrainingJobOf(c, id);
        if (!name.ok()) return Fail(name.status());
        int64_t offset = 0;
        while (true) {
          auto out = c.Post("sagemaker", "/trainyard/v1/logs",
                            {{"trainingJobName", *name}, {"instance", instance}, {"startOffset", offset}});
          if (!out.ok()) return Fail(out.status());
          for (auto& e : (*out)["events"]) std::printf("%s\n", e["message"].get<std::string>().c_str());
          std::fflush(stdout);
          int64_t next = (*out)["nextOffset"];
          bool complete = (*out)["complete"];
          if (!follow || (complete && next == offset)) return 0;
          if (next == offset) std::this_thread::sleep_for(std::chrono::milliseconds(300));
          offset = next;
        }
      });
    });
  }

  // ---- events ----
  {
    auto* cmd = app.add_subcommand(
        "events", "Print stored events (state changes, blocked queues, alarms) in order, and with -f follow new ones.\n"
                  "Each line: SEQ TIME DETAIL-TYPE NAME STATUS [REASON]; --json prints each event's JSON on one line.");
    static std::string after, pattern;
    static std::vector<std::string> sources, detail_types, queues, shares;
    static bool follow = false;
    cmd->add_option("--after", after, "Start after this sequence number, or 'latest' (default: 0, or latest with -f)");
    cmd->add_option("--source", sources, "Only events from this source (aws.batch, aws.sagemaker, aws.cloudwatch, trainyard); repeatable");
    cmd->add_option("--detail-type", detail_types, "Only this detail-type (e.g. 'Batch Service Job State Change'); repeatable");
    cmd->add_option("--queue", queues, "Only events of jobs in this job queue; repeatable");
    cmd->add_option("--share", shares, "Only events of jobs in this share (fair-share identifier or quota share); repeatable");
    cmd->add_option("--pattern", pattern, "An EventBridge event pattern (JSON, or @file)");
    cmd->add_flag("-f,--follow", follow, "Keep waiting for new events (Ctrl-C ends)");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        json req = json::object();
        if (!sources.empty()) req["Sources"] = sources;
        if (!detail_types.empty()) req["DetailTypes"] = detail_types;
        if (!queues.empty()) req["JobQueues"] = queues;
        if (!shares.empty()) req["Shares"] = shares;
        if (!pattern.empty()) {
          auto text = TextArg(pattern);
          if (!text.ok()) return Fail(text.status());
          req["EventPattern"] = *text;
        }
        req["After"] = after.empty() ? (follow ? json("latest") : json(0)) : json(after);
        req["Limit"] = 500;
        while (true) {
          req["WaitSeconds"] = follow ? 20 : 0;
          auto out = c.Post("events", "/trainyard/v1/events", req);
          if (!out.ok()) return Fail(out.status());
          for (auto& e : (*out)["Events"]) {
            const json& ev = e["Event"];
            if (common.as_json) {
              std::printf("%s\n", ev.dump().c_str());
              continue;
            }
            const json& d = ev["detail"];
            std::string name, status, reason;
            if (d.contains("jobName")) {
              name = d.value("jobName", "");
              status = d.value("status", "");
              reason = d.value("statusReason", "");
            } else if (d.contains("TrainingJobName")) {
              name = d.value("TrainingJobName", "");
              status = d.value("TrainingJobStatus", "") + "/" + d.value("SecondaryStatus", "");
              reason = d.value("FailureReason", "");
            } else if (d.contains("alarmName")) {
              name = d.value("alarmName", "");
              status = d["state"].value("value", "");
              reason = d["state"].value("reason", "");
            } else if (d.contains("requestID")) {  // an audit record: who called what, and how it ended
              name = d.value("action", "");
              status = d.value("errorCode", "OK") + " " + std::to_string(d.value("httpStatus", 0));
              reason = "by " + (d.value("principal", "").empty() ? std::string("-") : d.value("principal", "")) + " from " +
                       d.value("sourceIPAddress", "");
            }
            std::printf("%llu  %s  %s  %s  %s%s%s\n", static_cast<unsigned long long>(e["Seq"].get<uint64_t>()),
                        ev.value("time", "").c_str(), ev.value("detail-type", "").c_str(), name.c_str(), status.c_str(),
                        reason.empty() ? "" : "  ", reason.c_str());
          }
          std::fflush(stdout);
          const bool more = (*out)["NextCursor"].get<uint64_t>() < (*out)["LatestSeq"].get<uint64_t>();
          // The server had too many waiting readers and answered at once: poll a second later.
          if (follow && !more && !out->value("Waited", true)) std::this_thread::sleep_for(std::chrono::seconds(1));
          req["After"] = (*out)["NextCursor"];
          if (!follow && !more) return 0;
        }
      });
    });
  }

  // ---- stop ----
  {
    auto* cmd = app.add_subcommand("stop", "Stop a training job (by name) or terminate a service job (by id).");
    static std::string id, reason = "Terminated from the trainyard CLI";
    cmd->add_option("id", id, "Service job id or training job name")->required();
    cmd->add_option("--reason", reason, "Reason recorded on a terminated service job");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        auto out = LooksLikeJobId(id) ? c.Call("batch", "TerminateServiceJob", {{"jobId", id}, {"reason", reason}})
                                      : c.Call("sagemaker", "StopTrainingJob", {{"TrainingJobName", id}});
        if (!out.ok()) return Fail(out.status());
        return 0;
      });
    });
  }

  // ---- snapshot ----
  {
    auto* cmd = app.add_subcommand("snapshot", "Show what runs next in a queue, and why each job waits.");
    static std::string queue;
    cmd->add_option("queue", queue, "Job queue name or ARN")->required();
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        auto out = c.Call("batch", "GetJobQueueSnapshot", {{"jobQueue", queue}});
        if (!out.ok()) return Fail(out.status());
        if (common.as_json) {
          std::printf("%s\n", out->dump(2).c_str());
          return 0;
        }
        std::printf("capacity in use:");
        for (auto& u : (*out)["queueUtilization"]["totalCapacityUsage"])
          std::printf(" %lld x %s", static_cast<long long>(u.value("quantity", int64_t{0})), u.value("capacityUnit", "").c_str());
        std::printf("\n");
        std::vector<std::vector<std::string>> rows;
        int pos = 1;
        for (auto& j : (*out)["frontOfQueue"]["jobs"]) {
          std::string arn = j.value("jobArn", "");
          int64_t estimate = j.value("trainyardEstimatedStartTime", int64_t{0});
          rows.push_back({std::to_string(pos++), arn.substr(arn.rfind('/') + 1),
                          FormatMs(j.value("earliestTimeAtPosition", int64_t{0})),
                          estimate > 0 ? FormatMs(estimate) : "unknown", j.value("trainyardWaitReason", "")});
        }
        PrintTable({"#", "JOB ID", "AT POSITION SINCE", "EXPECTED START", "WHY IT WAITS"}, rows);
        return 0;
      });
    });
  }

  // ---- top ----
  {
    auto* cmd = app.add_subcommand("top", "A live view of the queues (jobs per status), the host's capacity in use, the "
                                          "shares' capacity against their entitlement, alarms in ALARM and the running "
                                          "jobs, from GET /metrics and ListServiceJobs.");
    static double interval = 2;
    static bool once = false;
    cmd->add_option("--interval", interval, "Seconds between refreshes (default 2)")->check(CLI::Range(0.2, 3600.0));
    cmd->add_flag("--once", once, "Print one view and exit (no screen clearing)");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        for (;;) {
          auto text = c.GetText("/metrics");
          if (!text.ok()) return Fail(text.status());
          // "name{k="v",...} value" samples of the families this view shows.
          std::map<std::string, std::vector<std::pair<std::map<std::string, std::string>, double>>> samples;
          std::istringstream in(*text);
          for (std::string line; std::getline(in, line);) {
            if (line.empty() || line[0] == '#') continue;
            auto brace = line.find('{'), space = line.rfind(' ');
            if (space == std::string::npos) continue;
            std::string name = line.substr(0, std::min(brace, space));
            std::map<std::string, std::string> labels;
            if (brace != std::string::npos && brace < space) {
              std::string body = line.substr(brace + 1, line.rfind('}') - brace - 1);
              size_t pos = 0;
              while (pos < body.size()) {
                auto eq = body.find("=\"", pos);
                if (eq == std::string::npos) break;
                auto end = body.find('"', eq + 2);
                while (end != std::string::npos && body[end - 1] == '\\') end = body.find('"', end + 1);
                if (end == std::string::npos) break;
                labels[body.substr(pos, eq - pos)] = body.substr(eq + 2, end - eq - 2);
                pos = end + 2;  // past '"' and ','
              }
            }
            samples[name].push_back({labels, std::strtod(line.c_str() + space + 1, nullptr)});
          }
          auto fmt = [](double v) { return std::to_string(static_cast<long long>(v)); };
          std::string out;
          auto table = [&](const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
            std::vector<size_t> w(header.size());
            for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
            for (const auto& r : rows)
              for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
            auto line = [&](const std::vector<std::string>& r) {
              for (size_t i = 0; i < r.size(); ++i) out += r[i] + std::string(i + 1 < r.size() ? w[i] - r[i].size() + 2 : 0, ' ');
              out += "\n";
            };
            line(header);
            for (const auto& r : rows) line(r);
            out += "\n";
          };
          // Queues: jobs per status.
          static const std::vector<std::string> kStatuses = {"SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED",
                                                             "STARTING", "RUNNING", "SUCCEEDED", "FAILED"};
          std::map<std::string, std::map<std::string, double>> queues;
          for (const auto& [l, v] : samples["trainyard_jobs"]) queues[l.at("queue")][l.at("status")] = v;
          std::vector<std::vector<std::string>> rows;
          for (const auto& [q, by] : queues) {
            std::vector<std::string> r = {q};
            for (const auto& st : kStatuses) r.push_back(fmt(by.count(st) ? by.at(st) : 0));
            rows.push_back(r);
          }
          std::vector<std::string> header = {"QUEUE"};
          header.insert(header.end(), kStatuses.begin(), kStatuses.end());
          table(header, rows);
          // Host capacity per type and market.
          std::map<std::pair<std::string, std::string>, std::array<double, 2>> cap;
          for (const auto& [l, v] : samples["trainyard_host_instances"]) cap[{l.at("instance_type"), l.at("market")}][1] = v;
          for (const auto& [l, v] : samples["trainyard_host_instances_in_use"]) cap[{l.at("instance_type"), l.at("market")}][0] = v;
          rows.clear();
          for (const auto& [k, v] : cap)
            if (v[1] > 0) rows.push_back({k.first, k.second, fmt(v[0]) + "/" + fmt(v[1])});
          table({"INSTANCE TYPE", "MARKET", "IN USE"}, rows);
          // Shares holding capacity or entitled to some: fair shares' entitlement now, quota shares'
          // limits (summed over instance types).
          std::map<std::pair<std::string, std::string>, std::array<double, 2>> shares;  // in use, entitled
          for (const auto& [l, v] : samples["trainyard_share_instances_in_use"]) shares[{l.at("queue"), l.at("share")}][0] = v;
          for (const auto& [l, v] : samples["trainyard_fairshare_entitlement_instances"])
            shares[{l.at("queue"), l.at("share")}][1] = v;
          for (const auto& [l, v] : samples["trainyard_quota_share_limit_instances"])
            shares[{l.at("queue"), l.at("share")}][1] += v;
          rows.clear();
          for (const auto& [k, v] : shares) {
            if (v[0] <= 0 && v[1] <= 0) continue;
            char entitled[32];
            std::snprintf(entitled, sizeof entitled, "%.1f", v[1]);
            rows.push_back({k.first, k.second, fmt(v[0]), entitled});
          }
          if (!rows.empty()) table({"QUEUE", "SHARE", "INSTANCES", "ENTITLED"}, rows);
          // Alarms in ALARM.
          rows.clear();
          for (const auto& [l, v] : samples["trainyard_alarm_active"])
            if (v > 0) rows.push_back({l.at("alarm"), l.at("rule")});
          if (!rows.empty()) table({"ALARM", "RULE"}, rows);
          // Running jobs, per queue (the first page of each).
          rows.clear();
          for (const auto& [q, by] : queues) {
            if (!by.count("RUNNING") || by.at("RUNNING") == 0) continue;
            auto jobs = c.Call("batch", "ListServiceJobs", {{"jobQueue", q}, {"jobStatus", "RUNNING"}, {"maxResults", 20}});
            if (!jobs.ok()) return Fail(jobs.status());
            for (const auto& j : (*jobs)["jobSummaryList"])
              rows.push_back({q, j.value("jobName", ""), j.value("jobId", ""), FormatMs(j.value("startedAt", int64_t{0}))});
          }
          table({"QUEUE", "RUNNING JOB", "JOB ID", "STARTED"}, rows);
          if (once) {
            std::fputs(out.c_str(), stdout);
            return 0;
          }
          std::printf("\033[H\033[2J%s", out.c_str());
          std::fflush(stdout);
          std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(interval * 1000)));
        }
      });
    });
  }

  // ---- metrics ----
  {
    auto* cmd = app.add_subcommand(
        "metrics", "Print a training job's MetricDefinitions time series, as parsed from its logs; with --system, "
                   "the system metrics sampled on each instance (CPUUtilization, MemoryUtilization, DiskUtilization, "
                   "GPUUtilization, GPUMemoryUtilization; docs/metrics.md).");
    static std::string job, metric, host;
    static bool system = false;
    cmd->add_option("training-job-name", job, "The training job")->required();
    cmd->add_option("--metric", metric, "Only this metric (a MetricDefinitions Name; with --system a system metric name)");
    cmd->add_flag("--system", system, "The instances' system metrics instead, per host (<job>/algo-<n>)");
    cmd->add_option("--host", host, "With --system: only this host (<job>/algo-<n>, or algo-<n>)");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        json req = {{"TrainingJobName", job}};
        if (!metric.empty()) req["MetricName"] = metric;
        if (!system && !host.empty()) return Fail(InvalidArgument("--host goes with --system"));
        if (system && !host.empty()) req["Host"] = host.rfind("algo-", 0) == 0 ? job + "/" + host : host;
        auto out = c.Post("sagemaker", system ? "/trainyard/v1/system-metrics" : "/trainyard/v1/metric-series", req);
        if (!out.ok()) return Fail(out.status());
        // MetricDefinitions series come in pages (docs/metrics.md): the pages are joined per metric.
        while (!system && out->contains("NextToken")) {
          req["NextToken"] = (*out)["NextToken"];
          auto more = c.Post("sagemaker", "/trainyard/v1/metric-series", req);
          if (!more.ok()) return Fail(more.status());
          json& series = (*out)["Series"];
          for (auto& s : (*more)["Series"]) {
            if (!series.empty() && series.back()["MetricName"] == s["MetricName"]) {
              for (auto& p : s["Points"]) series.back()["Points"].push_back(std::move(p));
            } else {
              series.push_back(std::move(s));
            }
          }
          if (more->contains("NextToken")) (*out)["NextToken"] = (*more)["NextToken"];
          else out->erase("NextToken");
        }
        if (common.as_json) {
          std::printf("%s\n", out->dump(2).c_str());
          return 0;
        }
        // System series are per host, with values to two decimals; MetricDefinitions series as logged.
        std::vector<std::vector<std::string>> rows;
        for (auto& s : (*out)["Series"])
          for (auto& p : s["Points"]) {
            char v[32];
            std::snprintf(v, sizeof v, system ? "%.2f" : "%g", p["Value"].get<double>());
            std::vector<std::string> row = {s["MetricName"], FormatMs(static_cast<int64_t>(p["Timestamp"].get<double>() * 1000)), v};
            if (system) row.insert(row.begin(), s["Host"].get<std::string>());
            rows.push_back(std::move(row));
          }
        if (system) PrintTable({"HOST", "METRIC", "TIME", "VALUE"}, rows);
        else PrintTable({"METRIC", "TIME", "VALUE"}, rows);
        return 0;
      });
    });
  }

  // ---- costs ----
  {
    auto* cmd = app.add_subcommand("costs", "What training jobs cost at the instance catalogue's prices: per job, "
                                            "per queue and share, and in total, with the savings of managed spot.");
    static std::string queue;
    static bool by_job = false;
    cmd->add_option("--queue", queue, "Only the jobs of this job queue");
    cmd->add_flag("--jobs", by_job, "List every training job, not just the totals per share");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        json req = json::object();
        if (!queue.empty()) req["JobQueue"] = queue;
        auto out = c.Post("sagemaker", "/trainyard/v1/costs", req);
        if (!out.ok()) return Fail(out.status());
        if (common.as_json) {
          std::printf("%s\n", out->dump(2).c_str());
          return 0;
        }
        auto money = [](const json& v) {
          char b[32];
          std::snprintf(b, sizeof b, "%.6f", v.get<double>());
          return std::string(b);
        };
        auto pct = [](const json& v) {
          char b[16];
          std::snprintf(b, sizeof b, "%.1f%%", v.get<double>());
          return std::string(b);
        };
        std::vector<std::vector<std::string>> rows;
        if (by_job) {
          for (auto& j : (*out)["Jobs"])
            rows.push_back({j["TrainingJobName"], j["JobQueue"].get<std::string>().empty() ? "-" : j["JobQueue"].get<std::string>(),
                            j["Share"].get<std::string>().empty() ? "-" : j["Share"].get<std::string>(),
                            j["InstanceType"].get<std::string>() + " x" + std::to_string(j["InstanceCount"].get<int64_t>()),
                            j["ManagedSpot"].get<bool>() ? "spot" : "on-demand", std::to_string(j["SpotInterruptions"].get<int>()),
                            std::to_string(j["TrainingTimeInSeconds"].get<int64_t>()),
                            std::to_string(j["BillableTimeInSeconds"].get<int64_t>()), money(j["CostUsd"]),
                            pct(j["SavingsPercent"])});
          PrintTable({"TRAINING JOB", "QUEUE", "SHARE", "INSTANCES", "MARKET", "INTERRUPTIONS", "TRAINING S", "BILLABLE S",
                      "COST USD", "SAVINGS"},
                     rows);
          std::printf("\n");
          rows.clear();
        }
        for (auto& sh : (*out)["Shares"])
          rows.push_back({sh["JobQueue"].get<std::string>().empty() ? "(CreateTrainingJob)" : sh["JobQueue"].get<std::string>(),
                          sh["Share"].get<std::string>().empty() ? "-" : sh["Share"].get<std::string>(),
                          std::to_string(sh["Jobs"].get<int64_t>()), money(sh["InstanceHours"]), money(sh["CostUsd"]),
                          money(sh["OnDemandCostUsd"]), pct(sh["SavingsPercent"])});
        const json& t = (*out)["Total"];
        rows.push_back({"total", "", std::to_string(t["Jobs"].get<int64_t>()), money(t["InstanceHours"]), money(t["CostUsd"]),
                        money(t["OnDemandCostUsd"]), pct(t["SavingsPercent"])});
        PrintTable({"QUEUE", "SHARE", "JOBS", "INSTANCE HOURS", "COST USD", "ON-DEMAND USD", "SAVINGS"}, rows);
        return 0;
      });
    });
  }

  // ---- what-if ----
  {
    auto* cmd = app.add_subcommand(
        "what-if",
        "Replay a job queue's recent service jobs through the simulator (docs/simulate.md, \"What if\"): with its "
        "current settings (Baseline: how close the model comes to what happened) and with changed share weights, "
        "quota limits or capacity (Simulated), and print waits and utilization per share beside what happened.");
    static std::string queue;
    static std::vector<std::string> weights, quotas;
    static int64_t hours = 0, capacity = 0;
    cmd->add_option("--queue", queue, "The job queue (name or ARN)")->required();
    cmd->add_option("--weight", weights, "SHARE=WEIGHT (repeatable): a fair share's weightFactor, 0.0001..999.9999, lower gets more");
    cmd->add_option("--quota", quotas, "SHARE=INSTANCES (repeatable): a quota share's limit, in instances");
    cmd->add_option("--hours", hours, "How far back the history goes, 1..720 (default 24)");
    cmd->add_option("--capacity", capacity, "The instances to replay on (default the queue's)");
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        json req = {{"JobQueue", queue}};
        if (hours) req["HistoryHours"] = hours;
        if (capacity) req["Capacity"] = capacity;
        // SHARE=VALUE pairs; the server checks the names and ranges.
        auto pairs = [](const std::vector<std::string>& args, const char* flag, bool integer, json* out) -> Status {
          for (const std::string& a : args) {
            const size_t eq = a.rfind('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == a.size())
              return InvalidArgument(std::string(flag) + " takes SHARE=VALUE, not '" + a + "'");
            const std::string v = a.substr(eq + 1);
            char* end = nullptr;
            if (integer) {
              const long long n = std::strtoll(v.c_str(), &end, 10);
              if (*end) return InvalidArgument(std::string(flag) + " " + a + ": '" + v + "' is not an integer");
              (*out)[a.substr(0, eq)] = n;
            } else {
              const double d = std::strtod(v.c_str(), &end);
              if (*end) return InvalidArgument(std::string(flag) + " " + a + ": '" + v + "' is not a number");
              (*out)[a.substr(0, eq)] = d;
            }
          }
          return Status::Ok();
        };
        json w = json::object(), q = json::object();
        if (Status st = pairs(weights, "--weight", false, &w); !st.ok()) return Fail(st);
        if (Status st = pairs(quotas, "--quota", true, &q); !st.ok()) return Fail(st);
        if (!w.empty()) req["ShareWeights"] = w;
        if (!q.empty()) req["QuotaLimits"] = q;
        auto out = c.Post("sagemaker", "/trainyard/v1/what-if", req);
        if (!out.ok()) return Fail(out.status());
        if (common.as_json) {
          std::printf("%s\n", out->dump(2).c_str());
          return 0;
        }
        auto num = [](const json& v, const char* fmt) {
          if (v.is_null()) return std::string("-");
          char b[32];
          std::snprintf(b, sizeof b, fmt, v.get<double>());
          return std::string(b);
        };
        std::vector<std::vector<std::string>> rows;
        auto add = [&](const std::string& share, const json& row) {
          for (const char* run : {"Actual", "Baseline", "Simulated"}) {
            const json& f = row[run];
            rows.push_back({share, run, std::to_string(f["Jobs"].get<int64_t>()), num(f["MeanWaitSeconds"], "%.0f"),
                            num(f["P50WaitSeconds"], "%.0f"), num(f["P90WaitSeconds"], "%.0f"),
                            num(f["InstanceHours"], "%.2f"), num(f["UtilizationPercent"], "%.1f%%")});
          }
        };
        for (const auto& sh : (*out)["Shares"]) add(sh["Share"].get<std::string>().empty() ? "-" : sh["Share"].get<std::string>(), sh);
        add("total", (*out)["Totals"]);
        std::printf("%s: %lld jobs in the last %lld hours, %lld instances (simulated: %lld)\n\n",
                    (*out)["JobQueue"].get<std::string>().c_str(), static_cast<long long>((*out)["Jobs"].get<int64_t>()),
                    static_cast<long long>(hours ? hours : 24), static_cast<long long>((*out)["Capacity"]["Current"].get<int64_t>()),
                    static_cast<long long>((*out)["Capacity"]["Simulated"].get<int64_t>()));
        PrintTable({"SHARE", "RUN", "JOBS", "MEAN WAIT S", "P50 WAIT S", "P90 WAIT S", "INSTANCE HOURS", "UTILIZATION"}, rows);
        for (const auto& n : (*out)["Notes"]) std::printf("note: %s\n", n.get<std::string>().c_str());
        return 0;
      });
    });
  }

  // ---- admin advance-clock, admin interrupt, admin audit, admin user|key|policy ----
  {
    auto* admin = app.add_subcommand("admin", "Operator commands: users, access keys and policies; tests and maintenance.");
    admin->require_subcommand(1);
    AddIamCommands(admin, common, run);
    {
      auto* cmd = admin->add_subcommand(
          "interrupt", "Reclaim a managed spot training job's instances, as a spot interruption: each instance gets "
                       "the notice file and SIGTERM, then executor.spot_notice_seconds to checkpoint and exit; the job "
                       "shows Interrupted and restarts from its checkpoints when spot capacity is free.");
      static std::string name;
      cmd->add_option("training-job-name", name, "The training job (a service job's attempt is named in its attempts)")->required();
      AddCommon(cmd, common);
      cmd->callback([&run] {
        run = WithClient(common, [](Client& c) {
          auto out = c.Post("sagemaker", "/trainyard/v1/admin/interrupt", {{"TrainingJobName", name}});
          if (!out.ok()) return Fail(out.status());
          std::printf("interrupted %s\n", name.c_str());
          return 0;
        });
      });
    }
    {
      auto* cmd = admin->add_subcommand(
          "audit", "Print the audit trail, newest first: every mutating API call (whatever its outcome) and every "
                   "call refused for its credentials, permissions or rate, with who made it, from where, on what, "
                   "and how it ended (docs/security.md, \"Audit\"). Successful reads are not recorded.");
      static std::string since, until, principal, action, resource;
      static bool denied = false;
      static int limit = 100;
      cmd->add_option("--since", since, "Only calls at or after this time: ISO-8601 (2026-05-01, 2026-05-01T12:00:00Z) "
                                        "or an age (90s, 15m, 2h, 7d)");
      cmd->add_option("--until", until, "Only calls at or before this time (same forms as --since)");
      cmd->add_option("--principal", principal, "Only calls by this principal (\"root\", or a user's ARN)");
      cmd->add_option("--action", action, "Only this action (batch:SubmitServiceJob) or operation (SubmitServiceJob)");
      cmd->add_option("--resource", resource, "Only calls naming this resource (a queue, job id, job name or ARN)");
      cmd->add_flag("--denied", denied, "Only calls refused for credentials, permissions or rate");
      cmd->add_option("--limit", limit, "Print at most this many records (default 100)")->check(CLI::Range(1, 1000000));
      AddCommon(cmd, common);
      cmd->callback([&run] {
        run = WithClient(common, [](Client& c) {
          json req = json::object();
          const int64_t now = SystemClock::instance().now_ms();
          for (auto [flag, text, member] : {std::tuple{"--since", &since, "StartTime"}, std::tuple{"--until", &until, "EndTime"}}) {
            if (text->empty()) continue;
            auto ms = ParseWhen(*text, now);
            if (!ms.ok()) return Fail(InvalidArgument(std::string(flag) + ": " + ms.status().message()));
            req[member] = static_cast<double>(*ms) / 1000.0;
          }
          json attributes = json::array();
          auto attribute = [&](const char* key, const std::string& v) {
            if (!v.empty()) attributes.push_back({{"AttributeKey", key}, {"AttributeValue", v}});
          };
          attribute("Principal", principal);
          attribute(action.find(':') != std::string::npos ? "Action" : "EventName", action);
          attribute("ResourceName", resource);
          if (!attributes.empty()) req["LookupAttributes"] = attributes;
          if (denied) req["DeniedOnly"] = true;
          json events = json::array();
          while (static_cast<int>(events.size()) < limit) {
            req["MaxResults"] = std::min(50, limit - static_cast<int>(events.size()));
            auto out = c.Post("sagemaker", "/trainyard/v1/admin/audit", req);
            if (!out.ok()) return Fail(out.status());
            for (auto& e : (*out)["Events"]) events.push_back(std::move(e));
            if (!out->contains("NextToken")) break;
            req["NextToken"] = (*out)["NextToken"];
          }
          if (common.as_json) {
            std::printf("%s\n", json{{"Events", events}}.dump(2).c_str());
            return 0;
          }
          std::vector<std::vector<std::string>> rows;
          for (const auto& e : events) {
            json r = json::parse(e.value("CloudTrailEvent", "{}"), nullptr, false);
            if (!r.is_object()) continue;
            std::string resources;
            for (const auto& res : r.value("resources", json::array()))
              resources += (resources.empty() ? "" : ",") + res.value("name", "");
            std::string outcome = r.contains("errorCode") ? r.value("errorCode", "") : "OK";
            outcome += " " + std::to_string(r.value("httpStatus", 0));
            const std::string who = r.value("principal", "");
            rows.push_back({FormatMs(r.value("eventTimeMs", int64_t{0})), who.empty() ? "-" : who,
                            r.value("userIdentity", json::object()).value("accessKeyId", "-"), r.value("action", ""),
                            resources.empty() ? "-" : resources, r.value("sourceIPAddress", "-"), outcome,
                            r.value("requestID", "")});
          }
          PrintTable({"TIME", "PRINCIPAL", "ACCESS KEY", "ACTION", "RESOURCE", "SOURCE", "OUTCOME", "REQUEST ID"}, rows);
          return 0;
        });
      });
    }
    {
      auto* cmd = admin->add_subcommand(
          "status", "The servers over one PostgreSQL store (docs/operations.md, \"High availability\"): each one's "
                    "role, the term it leads or last saw, and its lag (how long since it last reached the database); "
                    "and which server leads. GET /healthz of the endpoint; one server over SQLite always leads.");
      AddCommon(cmd, common);
      auto token = std::make_shared<std::string>();
      cmd->add_option("--metrics-token", *token,
                      "[server] metrics_token, when the server has one: the detail needs it (default $TRAINYARD_METRICS_TOKEN)");
      cmd->callback([&run, token] {
        run = WithClient(common, [token](Client& c) {
          std::string bearer = *token;
          if (bearer.empty())
            if (const char* e = std::getenv("TRAINYARD_METRICS_TOKEN")) bearer = e;
          auto got = c.GetAny("/healthz", bearer);
          if (!got.ok()) return Fail(got.status());
          json out = json::parse(got->second, nullptr, false);
          if (!out.is_object()) return Fail(Unavailable("GET /healthz answered " + std::to_string(got->first) + ": " + got->second));
          if (common.as_json) {
            std::printf("%s\n", out.dump(2).c_str());
            return got->first == 200 ? 0 : 1;
          }
          auto str = [](const json& o, const char* k) { return o.contains(k) ? o[k].is_string() ? o[k].get<std::string>() : o[k].dump() : std::string("-"); };
          std::printf("this server: %s, %s (store: %s)\n", str(out, "role").c_str(), str(out, "status").c_str(), str(out, "store").c_str());
          if (out.contains("leader")) {
            const json& l = out["leader"];
            std::printf("leader: %s at %s, term %s, lease %s ms left, held %s ms\n\n", str(l, "name").c_str(), str(l, "address").c_str(),
                        str(l, "term").c_str(), str(l, "lease_remaining_ms").c_str(), str(l, "held_ms").c_str());
          }
          if (out.contains("servers")) {
            std::vector<std::vector<std::string>> rows;
            for (const json& s : out["servers"])
              rows.push_back({str(s, "name"), str(s, "address"), str(s, "role"), str(s, "term"), str(s, "lag_ms"), str(s, "up_ms")});
            PrintTable({"SERVER", "ADDRESS", "ROLE", "TERM", "LAG MS", "UP MS"}, rows);
          }
          return got->first == 200 ? 0 : 1;
        });
      });
    }
    {
      auto* cmd = admin->add_subcommand(
          "capacity", "What the host offers per instance type and market: the configured count, what the executor's "
                      "cluster reports it can hold (\"configured\" on the local executor), in use, held by warm pools "
                      "and free; and the cluster's nodes, with why each unusable one is (docs/slurm-capacity.md).");
      AddCommon(cmd, common);
      cmd->callback([&run] {
        run = WithClient(common, [](Client& c) {
          auto out = c.Post("sagemaker", "/trainyard/v1/admin/capacity", json::object());
          if (!out.ok()) return Fail(out.status());
          if (common.as_json) {
            std::printf("%s\n", out->dump(2).c_str());
            return 0;
          }
          auto n = [](const json& v) { return std::to_string(v.get<int64_t>()); };
          std::vector<std::vector<std::string>> rows;
          for (const json& r : (*out)["Capacity"])
            rows.push_back({r["InstanceType"], r["ManagedSpot"].get<bool>() ? "spot" : "on-demand", n(r["Configured"]),
                            r.contains("Reported") ? n(r["Reported"]) : "configured", n(r["InUse"]),
                            n(r["WarmPoolHeld"]), n(r["Free"])});
          PrintTable({"INSTANCE TYPE", "MARKET", "CONFIGURED", "REPORTED", "IN USE", "WARM POOLS", "FREE"}, rows);
          if (out->contains("Problem")) std::printf("\nproblem: %s\n", (*out)["Problem"].get<std::string>().c_str());
          if (!out->contains("Nodes")) return 0;
          auto joined = [](const json& list) {
            std::string s;
            for (const json& v : list) s += (s.empty() ? "" : ",") + v.get<std::string>();
            return s.empty() ? "-" : s;
          };
          rows.clear();
          for (const json& node : (*out)["Nodes"])
            rows.push_back({node["NodeName"], node["State"], joined(node["Partitions"]), joined(node["Features"]),
                            n(node["CpusAllocated"]) + "/" + n(node["Cpus"]),
                            n(node["MemoryAllocatedMiB"]) + "/" + n(node["MemoryMiB"]),
                            n(node["GpusAllocated"]) + "/" + n(node["Gpus"]),
                            node["Usable"].get<bool>() ? "yes" : "no: " + node["Why"].get<std::string>()});
          std::printf("\n");
          PrintTable({"NODE", "STATE", "PARTITIONS", "FEATURES", "CPUS", "MEMORY MIB", "GPUS", "USABLE"}, rows);
          return 0;
        });
      });
    }
    auto* cmd = admin->add_subcommand(
        "advance-clock", "Move the server's clock on by SECONDS (test-only: the server must run with "
                         "`serve --clock=offset`; warm-pool expiry and the 28-day lifetime follow it).");
    static int64_t seconds = 0;
    cmd->add_option("seconds", seconds, "Seconds to move the clock on (a positive whole number)")->required();
    AddCommon(cmd, common);
    cmd->callback([&run] {
      run = WithClient(common, [](Client& c) {
        auto out = c.Post("sagemaker", "/trainyard/v1/admin/advance-clock", {{"seconds", seconds}});
        if (!out.ok()) return Fail(out.status());
        std::printf("server clock now %s\n", FormatMs(static_cast<int64_t>((*out)["now"].get<double>() * 1000)).c_str());
        return 0;
      });
    });
  }
}

}  // namespace ty::cli
