// Role sessions (role_sessions.h).
#include "control/role_sessions.h"

#include <openssl/crypto.h>

#include "core/strings.h"

namespace ty::control {

namespace {

// A fresh key, secret and token acting as `role_name` under `session_name` until `expires`.
RoleSession NewSession(const std::string& role_name, const std::string& session_name, const std::string& account_id,
                       EpochMs expires) {
  RoleSession s;
  s.access_key_id = "ASIA" + RandomAlnum(16, true);
  s.secret = RandomAlnum(40, false);
  s.token = RandomAlnum(96, false);
  s.role_name = role_name;
  s.role_arn = "arn:aws:iam::" + account_id + ":role/" + role_name;
  s.principal_arn = "arn:aws:sts::" + account_id + ":assumed-role/" + role_name + "/" + session_name;
  s.session_name = session_name;
  s.expires = expires;
  return s;
}

}  // namespace

RoleSession RoleSessions::Mint(const std::string& job, const std::string& role_name, const std::string& account_id,
                               EpochMs now) {
  MutexLock lock(mu_);
  return MintLocked(job, role_name, account_id, now);
}

RoleSession RoleSessions::MintLocked(const std::string& job, const std::string& role_name, const std::string& account_id,
                                     EpochMs now) {
  RoleSession s = NewSession(role_name, job, account_id, now + kRoleSessionMs);
  s.job = job;
  by_key_[s.access_key_id] = s;
  newest_[job] = s.access_key_id;
  return s;
}

RoleSession RoleSessions::MintAssumed(const std::string& role_name, const std::string& session_name,
                                      const std::string& account_id, EpochMs duration_ms, EpochMs now) {
  MutexLock lock(mu_);
  for (auto it = by_key_.begin(); it != by_key_.end();)
    it = it->second.job.empty() && it->second.expires <= now ? by_key_.erase(it) : std::next(it);
  RoleSession s = NewSession(role_name, session_name, account_id, now + duration_ms);
  by_key_[s.access_key_id] = s;
  return s;
}

void RoleSessions::SetBearer(const std::string& job, const std::string& bearer) {
  MutexLock lock(mu_);
  bearers_[job] = bearer;
}

std::string RoleSessions::JobOfBearer(const std::string& bearer) const {
  MutexLock lock(mu_);
  std::string found;
  for (const auto& [job, b] : bearers_)  // every one compared, the same way: no early exit to time
    if (b.size() == bearer.size() && !bearer.empty() && CRYPTO_memcmp(b.data(), bearer.data(), b.size()) == 0) found = job;
  return found;
}

void RoleSessions::Revoke(const std::string& job) {
  MutexLock lock(mu_);
  newest_.erase(job);
  bearers_.erase(job);
  for (auto it = by_key_.begin(); it != by_key_.end();) it = it->second.job == job ? by_key_.erase(it) : std::next(it);
}

std::optional<RoleSession> RoleSessions::Find(const std::string& access_key_id) const {
  MutexLock lock(mu_);
  auto it = by_key_.find(access_key_id);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

std::optional<RoleSession> RoleSessions::Current(const std::string& job, const std::string& account_id, EpochMs now) {
  MutexLock lock(mu_);
  auto newest = newest_.find(job);
  if (newest == newest_.end()) return std::nullopt;
  const RoleSession& s = by_key_.at(newest->second);
  if (s.expires - now > kRefreshBeforeMs) return s;
  const std::string role = s.role_name;
  // Sessions that expired long ago are dropped here; an expired key still known answers
  // ExpiredToken, one dropped answers as unknown.
  for (auto it = by_key_.begin(); it != by_key_.end();)
    it = it->second.job == job && it->second.expires + kRoleSessionMs <= now ? by_key_.erase(it) : std::next(it);
  return MintLocked(job, role, account_id, now);
}

size_t RoleSessions::size() const {
  MutexLock lock(mu_);
  return by_key_.size();
}

}  // namespace ty::control
