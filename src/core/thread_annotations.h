// Clang thread-safety annotations (-Wthread-safety): which lock guards which member, which
// functions need a lock held. They compile to nothing elsewhere. Mutex and MutexLock are
// std::mutex and std::lock_guard with the annotations libstdc++ lacks.
#pragma once

#include <mutex>

#if defined(__clang__)
#define TY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TY_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) TY_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TY_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) TY_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TY_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) TY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) TY_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) TY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) TY_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define EXCLUDES(...) TY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS TY_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace ty {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope. Waits on a std::condition_variable_any take the Mutex itself.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace ty
