// EventBridge rules, targets, connections and API destinations (event_bus.h): the commands that
// change them and their store documents.
#include "control/event_bus.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

using nlohmann::json;

namespace {

constexpr const char* kRuleKey = "eventbus/rule/";
constexpr const char* kConnectionKey = "eventbus/connection/";
constexpr const char* kDestinationKey = "eventbus/api-destination/";

// The start of the period of `r`'s schedule that `now` is in.
EpochMs ScheduleSlot(const EventRule& r, EpochMs now) {
  if (now <= r.schedule_since) return r.schedule_since;
  return r.schedule_since + (now - r.schedule_since) / r.schedule_period_ms * r.schedule_period_ms;
}

Status NoSuchRule(const std::string& name) { return NotFound("Rule " + name + " does not exist."); }

const WebhookConfig* ConfiguredWebhook(const Config& c, const std::string& name) {
  for (const auto& w : c.webhooks)
    if (w.name == name) return &w;
  return nullptr;
}

Status ReadOnly(const std::string& name) {
  return FailedPrecondition("Rule " + name + " is a webhook of the configuration file ([[webhooks]] name = \"" + name +
                         "\"): change it there, not through the API");
}

}  // namespace

std::string EncodeDoc(const EventRule& v) {
  json targets = json::array();
  for (const auto& t : v.targets) {
    json j = {{"id", t.id}, {"arn", t.arn}, {"input", t.input}, {"input_path", t.input_path},
              {"generation", t.generation}, {"maximum_retry_attempts", t.maximum_retry_attempts},
              {"maximum_event_age_seconds", t.maximum_event_age_seconds}};
    if (!t.input_template.empty()) {
      j["input_paths_map"] = t.input_paths_map;
      j["input_template"] = t.input_template;
    }
    targets.push_back(std::move(j));
  }
  json doc = {{"name", v.name},       {"arn", v.arn},         {"event_pattern", v.event_pattern},
              {"description", v.description}, {"enabled", v.enabled}, {"tags", v.tags},
              {"targets", targets},   {"created", v.created}, {"owner", v.owner}};
  if (!v.schedule_expression.empty()) {
    doc["schedule_expression"] = v.schedule_expression;
    doc["schedule_period_ms"] = v.schedule_period_ms;
    doc["schedule_since"] = v.schedule_since;
  }
  return doc.dump();
}

std::string EncodeDoc(const EventConnection& v) {
  return json{{"name", v.name},         {"arn", v.arn},           {"description", v.description},
              {"authorization_type", v.authorization_type},   {"key_name", v.key_name},
              {"key_value", v.key_value}, {"username", v.username}, {"password", v.password},
              {"created", v.created},   {"modified", v.modified}}
      .dump();
}

std::string EncodeDoc(const ApiDestination& v) {
  return json{{"name", v.name},
              {"arn", v.arn},
              {"description", v.description},
              {"connection_arn", v.connection_arn},
              {"invocation_endpoint", v.invocation_endpoint},
              {"http_method", v.http_method},
              {"rate_limit_per_second", v.rate_limit_per_second},
              {"created", v.created},
              {"modified", v.modified}}
      .dump();
}

bool DecodeDoc(const std::string& doc, EventRule* v) {
  json j = json::parse(doc, nullptr, false);
  if (!j.is_object()) return false;
  v->name = j.value("name", "");
  v->arn = j.value("arn", "");
  v->event_pattern = j.value("event_pattern", "");
  v->description = j.value("description", "");
  v->enabled = j.value("enabled", true);
  if (j.contains("tags") && j["tags"].is_object()) v->tags = j["tags"].get<Tags>();
  v->created = j.value("created", EpochMs{0});
  v->owner = j.value("owner", "");
  v->schedule_expression = j.value("schedule_expression", "");
  v->schedule_period_ms = j.value("schedule_period_ms", int64_t{0});
  v->schedule_since = j.value("schedule_since", EpochMs{0});
  for (const auto& t : j.value("targets", json::array())) {
    if (!t.is_object()) continue;
    EventTarget target;
    target.id = t.value("id", "");
    target.arn = t.value("arn", "");
    target.input = t.value("input", "");
    target.input_path = t.value("input_path", "");
    // Documents written before InputTransformer have neither field.
    target.input_template = t.value("input_template", "");
    if (auto m = t.find("input_paths_map"); m != t.end() && m->is_object())
      for (const auto& [k, path] : m->items())
        if (path.is_string()) target.input_paths_map[k] = path.get<std::string>();
    target.generation = t.value("generation", uint64_t{0});
    target.maximum_retry_attempts = t.value("maximum_retry_attempts", 185);
    target.maximum_event_age_seconds = t.value("maximum_event_age_seconds", 86400);
    v->targets.push_back(std::move(target));
  }
  return !v->name.empty();
}

bool DecodeDoc(const std::string& doc, EventConnection* v) {
  json j = json::parse(doc, nullptr, false);
  if (!j.is_object()) return false;
  v->name = j.value("name", "");
  v->arn = j.value("arn", "");
  v->description = j.value("description", "");
  v->authorization_type = j.value("authorization_type", "");
  v->key_name = j.value("key_name", "");
  v->key_value = j.value("key_value", "");
  v->username = j.value("username", "");
  v->password = j.value("password", "");
  v->created = j.value("created", EpochMs{0});
  v->modified = j.value("modified", EpochMs{0});
  return !v->name.empty();
}

bool DecodeDoc(const std::string& doc, ApiDestination* v) {
  json j = json::parse(doc, nullptr, false);
  if (!j.is_object()) return false;
  v->name = j.value("name", "");
  v->arn = j.value("arn", "");
  v->description = j.value("description", "");
  v->connection_arn = j.value("connection_arn", "");
  v->invocation_endpoint = j.value("invocation_endpoint", "");
  v->http_method = j.value("http_method", "POST");
  v->rate_limit_per_second = j.value("rate_limit_per_second", 0);
  v->created = j.value("created", EpochMs{0});
  v->modified = j.value("modified", EpochMs{0});
  return !v->name.empty();
}

void Controller::LoadEventBus(State& s) {
  EventBus& bus = s.event_bus;
  Status st = store_->LoadAll(store::Kind::kMeta, [&](const std::string& key, const std::string& doc) {
    if (StartsWith(key, kRuleKey)) {
      EventRule r;
      if (!DecodeDoc(doc, &r)) return;
      for (const auto& t : r.targets) bus.next_generation = std::max(bus.next_generation, t.generation + 1);
      if (r.owner.empty())
        spdlog::warn("EventBridge rule {} was stored without its owner and delivers nothing until a PutRule names "
                     "one (docs/events.md, \"Who receives which events\")", r.name);
      bus.rules[r.name] = std::move(r);
    } else if (StartsWith(key, kConnectionKey)) {
      EventConnection c;
      if (DecodeDoc(doc, &c)) bus.connections[c.name] = std::move(c);
    } else if (StartsWith(key, kDestinationKey)) {
      ApiDestination d;
      if (DecodeDoc(doc, &d)) bus.api_destinations[d.name] = std::move(d);
    }
  });
  if (!st.ok()) {
    spdlog::critical("cannot load EventBridge rules: {}", st.message());
    std::abort();
  }
}

void Controller::WriteEventBus(const Turn& t, std::vector<store::Write>* writes) {
  const EventBus& bus = state_.event_bus;
  for (const std::string& key : t.event_bus) {
    std::string doc;  // empty: deleted
    if (StartsWith(key, kRuleKey)) {
      if (auto it = bus.rules.find(key.substr(14)); it != bus.rules.end()) doc = EncodeDoc(it->second);
    } else if (StartsWith(key, kConnectionKey)) {
      if (auto it = bus.connections.find(key.substr(20)); it != bus.connections.end()) doc = EncodeDoc(it->second);
    } else if (StartsWith(key, kDestinationKey)) {
      if (auto it = bus.api_destinations.find(key.substr(25)); it != bus.api_destinations.end())
        doc = EncodeDoc(it->second);
    }
    writes->push_back({store::Kind::kMeta, key, std::move(doc)});
  }
}

StatusOr<EventRule> Controller::PutRule(const PutRuleCommand& cmd) {
  if (ConfiguredWebhook(config_, cmd.name)) return ReadOnly(cmd.name);
  return Execute<EventRule>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<EventRule> {
    EventBus& bus = state_.event_bus;
    auto [it, created] = bus.rules.try_emplace(cmd.name);
    EventRule& r = it->second;
    if (created) {
      r.name = cmd.name;
      r.arn = Arn("events", "rule/" + cmd.name);
      r.created = t.now;
      r.tags = cmd.tags;
    }
    if (r.owner.empty()) r.owner = cmd.principal;
    // A rule enabled again delivers only what happens from now on.
    if (cmd.enabled && !r.enabled)
      for (auto& target : r.targets) target.generation = bus.next_generation++;
    r.event_pattern = cmd.event_pattern;
    r.description = cmd.description;
    // A new or changed schedule counts its periods from now; an unchanged one keeps its phase.
    if (cmd.schedule_expression != r.schedule_expression) {
      r.schedule_expression = cmd.schedule_expression;
      r.schedule_period_ms = cmd.schedule_period_ms;
      r.schedule_since = t.now;
      bus.schedule_slots.erase(cmd.name);
    }
    if (r.schedule_period_ms > 0 && cmd.enabled && (!r.enabled || !bus.schedule_slots.count(cmd.name)))
      bus.schedule_slots[cmd.name] = ScheduleSlot(r, t.now);
    r.enabled = cmd.enabled;
    t.event_bus.insert(kRuleKey + cmd.name);
    return r;
  });
}

Status Controller::DeleteRule(const std::string& name) {
  if (ConfiguredWebhook(config_, name)) return ReadOnly(name);
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto it = state_.event_bus.rules.find(name);
    if (it == state_.event_bus.rules.end()) return NoSuchRule(name);
    if (!it->second.targets.empty())
      return InvalidArgument("Rule can't be deleted since it has targets: remove its " +
                             std::to_string(it->second.targets.size()) + " target(s) first (RemoveTargets).");
    state_.event_bus.rules.erase(it);
    t.event_bus.insert(kRuleKey + name);
    return Status::Ok();
  });
}

Status Controller::SetRuleEnabled(const std::string& name, bool enabled) {
  if (ConfiguredWebhook(config_, name)) return ReadOnly(name);
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    EventBus& bus = state_.event_bus;
    auto it = bus.rules.find(name);
    if (it == bus.rules.end()) return NoSuchRule(name);
    EventRule& r = it->second;
    if (enabled == r.enabled) return Status::Ok();  // nothing changes, nothing is written
    if (enabled)
      for (auto& target : r.targets) target.generation = bus.next_generation++;
    // Enabled again, a schedule fires from its next period (none for the time it was disabled).
    if (enabled && r.schedule_period_ms > 0) bus.schedule_slots[name] = ScheduleSlot(r, t.now);
    r.enabled = enabled;
    t.event_bus.insert(kRuleKey + name);
    return Status::Ok();
  });
}

Status Controller::PutTargets(const PutTargetsCommand& cmd) {
  if (ConfiguredWebhook(config_, cmd.rule)) return ReadOnly(cmd.rule);
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    EventBus& bus = state_.event_bus;
    auto it = bus.rules.find(cmd.rule);
    if (it == bus.rules.end()) return NoSuchRule(cmd.rule);
    // Every target is checked before any is added: a refusal changes nothing.
    for (const EventTarget& target : cmd.targets) {
      const bool known = std::any_of(bus.api_destinations.begin(), bus.api_destinations.end(),
                                     [&](const auto& d) { return d.second.arn == target.arn; });
      if (!known)
        return NotFound("Targets[" + target.id + "].Arn: API destination " + target.arn + " does not exist.");
    }
    EventRule& r = it->second;
    size_t count = r.targets.size();
    for (const EventTarget& target : cmd.targets)
      if (std::none_of(r.targets.begin(), r.targets.end(), [&](const auto& x) { return x.id == target.id; })) ++count;
    if (count > 5)
      return InvalidArgument("Targets: rule " + cmd.rule + " would have " + std::to_string(count) +
                             " targets; a rule may have at most 5");
    for (const EventTarget& target : cmd.targets) {
      EventTarget added = target;
      added.generation = bus.next_generation++;
      auto same = std::find_if(r.targets.begin(), r.targets.end(), [&](const auto& x) { return x.id == target.id; });
      if (same != r.targets.end()) {
        *same = added;
      } else {
        r.targets.push_back(added);
      }
    }
    t.event_bus.insert(kRuleKey + cmd.rule);
    return Status::Ok();
  });
}

Status Controller::RemoveTargets(const RemoveTargetsCommand& cmd) {
  if (ConfiguredWebhook(config_, cmd.rule)) return ReadOnly(cmd.rule);
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto it = state_.event_bus.rules.find(cmd.rule);
    if (it == state_.event_bus.rules.end()) return NoSuchRule(cmd.rule);
    std::erase_if(it->second.targets, [&](const EventTarget& x) {
      return std::find(cmd.ids.begin(), cmd.ids.end(), x.id) != cmd.ids.end();
    });
    t.event_bus.insert(kRuleKey + cmd.rule);
    return Status::Ok();
  });
}

StatusOr<EventConnection> Controller::CreateConnection(const CreateConnectionCommand& cmd) {
  return Execute<EventConnection>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<EventConnection> {
    EventBus& bus = state_.event_bus;
    const std::string& name = cmd.connection.name;
    if (bus.connections.count(name)) return AlreadyExists("Connection " + name + " already exists.");
    EventConnection c = cmd.connection;
    c.arn = Arn("events", "connection/" + name);
    c.created = c.modified = t.now;
    bus.connections[name] = c;
    t.event_bus.insert(kConnectionKey + name);
    return c;
  });
}

Status Controller::DeleteConnection(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    EventBus& bus = state_.event_bus;
    auto it = bus.connections.find(name);
    if (it == bus.connections.end()) return NotFound("Connection " + name + " does not exist.");
    for (const auto& [dname, d] : bus.api_destinations)
      if (d.connection_arn == it->second.arn)
        return InvalidArgument("Connection " + name + " is used by API destination " + dname + ": delete that first");
    bus.connections.erase(it);
    t.event_bus.insert(kConnectionKey + name);
    return Status::Ok();
  });
}

StatusOr<ApiDestination> Controller::CreateApiDestination(const CreateApiDestinationCommand& cmd) {
  return Execute<ApiDestination>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ApiDestination> {
    EventBus& bus = state_.event_bus;
    const std::string& name = cmd.destination.name;
    if (bus.api_destinations.count(name)) return AlreadyExists("API destination " + name + " already exists.");
    const bool connected = std::any_of(bus.connections.begin(), bus.connections.end(), [&](const auto& c) {
      return c.second.arn == cmd.destination.connection_arn;
    });
    if (!connected) return NotFound("ConnectionArn: connection " + cmd.destination.connection_arn + " does not exist.");
    ApiDestination d = cmd.destination;
    d.arn = Arn("events", "api-destination/" + name);
    d.created = d.modified = t.now;
    bus.api_destinations[name] = d;
    t.event_bus.insert(kDestinationKey + name);
    return d;
  });
}

Status Controller::DeleteApiDestination(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    EventBus& bus = state_.event_bus;
    auto it = bus.api_destinations.find(name);
    if (it == bus.api_destinations.end()) return NotFound("API destination " + name + " does not exist.");
    for (const auto& [rname, r] : bus.rules)
      for (const auto& target : r.targets)
        if (target.arn == it->second.arn)
          return InvalidArgument("API destination " + name + " is a target of rule " + rname + " (Id " + target.id +
                                 "): remove the target first");
    bus.api_destinations.erase(it);
    t.event_bus.insert(kDestinationKey + name);
    return Status::Ok();
  });
}

void Controller::FireScheduledRules(Turn& t) {
  EventBus& bus = state_.event_bus;
  const bool stored = event_log_ && config_.events_enabled;
  std::erase_if(bus.schedule_slots, [&](const auto& s) REQUIRES(state_mu_) {
    auto it = bus.rules.find(s.first);
    return !stored || it == bus.rules.end() || !it->second.enabled || it->second.schedule_period_ms <= 0;
  });
  if (!stored) return;
  for (const auto& [name, r] : bus.rules) {
    if (!r.enabled || r.schedule_period_ms <= 0) continue;
    const EpochMs slot = ScheduleSlot(r, t.now);
    auto [it, first] = bus.schedule_slots.try_emplace(name, slot);
    if (first || slot <= it->second) continue;  // one event per period reached, however far the clock moved
    it->second = slot;
    json event = {{"version", "0"},
                  {"id", NewUuid()},
                  {"detail-type", "Scheduled Event"},
                  {"source", "aws.events"},
                  {"account", config_.account_id},
                  {"time", FormatIso8601(slot)},
                  {"region", config_.region},
                  {"resources", {r.arn}},
                  {"detail", json::object()}};
    EventTrigger e;
    e.kind = EventTrigger::Kind::kCustom;
    e.data = event.dump();
    e.at = t.now;
    t.events.push_back(std::move(e));
  }
}

Status Controller::PutEvents(const PutEventsCommand& cmd) {
  if (!event_log_ || !config_.events_enabled) return InvalidArgument("Entries: events are not enabled on this server ([events] enabled = false)");
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    for (size_t i = 0; i < cmd.events.size(); ++i) {
      EventTrigger e;
      e.kind = EventTrigger::Kind::kCustom;
      e.data = cmd.events[i];
      e.at = i < cmd.times.size() ? cmd.times[i] : t.now;
      e.principal = cmd.principal;
      t.events.push_back(std::move(e));
    }
    return Status::Ok();
  });
}

}  // namespace ty::control
