// Clang thread-safety annotations (-Wthread-safety): which lock guards which member, which
// functions need a lock held. They compile to nothing elsewhere. Mutex and MutexLock are
// std::mutex and std::lock_guard with the annotations libstdc++ lacks; SharedMutex, WriterLock
// and ReaderLock are std::shared_mutex, std::unique_lock and std::shared_lock likewise.
#pragma once

#include <mutex>
#include <shared_mutex>

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
#define ACQUIRE_SHARED(...) TY_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) TY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) TY_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) TY_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
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

// A reader-writer lock: the writer takes it exclusive (lock), readers shared (lock_shared).
class CAPABILITY("mutex") SharedMutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusive for its scope.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its scope. A std::condition_variable_any waits on the ReaderLock
// (its lock() and unlock() let the wait give the shared hold up and take it back).
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() RELEASE() {
    if (held_) mu_.unlock_shared();
  }
  void lock() ACQUIRE_SHARED() {
    mu_.lock_shared();
    held_ = true;
  }
  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock_shared();
  }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
  bool held_ = true;
};

}  // namespace ty
