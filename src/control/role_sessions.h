// Role sessions: the temporary credentials of a role (docs/security.md, "Roles for jobs" and
// "AssumeRole"). A running job's: one per live attempt, minted when the attempt starts (or is
// re-adopted after a restart) and revoked when it ends. An STS AssumeRole caller's: minted for the
// duration it asked for, belonging to no job, forgotten once expired (a server restart forgets it
// too). Kept in memory only: never stored, never in an event.
//
// Thread-safe: the controller mints and revokes in its turns; the request path looks keys up.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/thread_annotations.h"

namespace ty::control {

struct RoleSession {
  std::string access_key_id;  // ASIA + 16 characters
  std::string secret;         // 40 characters
  std::string token;          // the session token (X-Amz-Security-Token)
  std::string role_name;
  std::string role_arn;       // arn:aws:iam::<account>:role/<role>
  std::string principal_arn;  // arn:aws:sts::<account>:assumed-role/<role>/<job>
  std::string job;            // the training job whose attempt holds it; "" for an AssumeRole session
  std::string session_name;   // the AssumeRole RoleSessionName (the job's name for a job's session)
  EpochMs expires = 0;
};

// A session lasts this long; it is replaced by a fresh one once less than kRefreshBeforeMs is left.
inline constexpr EpochMs kRoleSessionMs = 60 * 60 * 1000;
inline constexpr EpochMs kRefreshBeforeMs = 15 * 60 * 1000;

class RoleSessions {
 public:
  // A fresh session for `job`'s attempt, drawn from the OS's CSPRNG. The job's earlier sessions
  // stay valid until they expire or the job's sessions are revoked.
  RoleSession Mint(const std::string& job, const std::string& role_name, const std::string& account_id, EpochMs now)
      EXCLUDES(mu_);
  // A session for an STS AssumeRole caller: `role_name` as `session_name`, valid `duration_ms` from
  // `now`. Sessions of AssumeRole callers that expired before `now` are dropped here, so they
  // cannot pile up in memory.
  RoleSession MintAssumed(const std::string& role_name, const std::string& session_name,
                          const std::string& account_id, EpochMs duration_ms, EpochMs now) EXCLUDES(mu_);
  // The bearer token `job`'s attempt sends to the credentials endpoint (set with its first Mint).
  void SetBearer(const std::string& job, const std::string& bearer) EXCLUDES(mu_);
  // The job whose bearer token is `bearer` (compared in constant time with each); "" when none.
  std::string JobOfBearer(const std::string& bearer) const EXCLUDES(mu_);
  // Ends every session of `job`: its keys are unknown from now on.
  void Revoke(const std::string& job) EXCLUDES(mu_);
  // The session whose access key is `id`, expired or not; nullopt when unknown or revoked.
  std::optional<RoleSession> Find(const std::string& access_key_id) const EXCLUDES(mu_);
  // The newest session of `job`, refreshed (a new one minted) when it has less than
  // kRefreshBeforeMs left; nullopt when the job holds none.
  std::optional<RoleSession> Current(const std::string& job, const std::string& account_id, EpochMs now) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

 private:
  RoleSession MintLocked(const std::string& job, const std::string& role_name, const std::string& account_id, EpochMs now)
      REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, RoleSession> by_key_ GUARDED_BY(mu_);
  std::map<std::string, std::string> newest_ GUARDED_BY(mu_);  // job -> its newest access key id
  std::map<std::string, std::string> bearers_ GUARDED_BY(mu_);  // job -> its bearer token
};

}  // namespace ty::control
