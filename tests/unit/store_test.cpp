#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "store/event_log.h"
#include "store/store.h"

namespace ty::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ty-store-" + std::to_string(::getpid()) + "-" +
                                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string db() const { return (dir_ / "t.db").string(); }

  static std::map<std::string, std::string> All(Store& s, Kind k) {
    std::map<std::string, std::string> out;
    EXPECT_TRUE(s.LoadAll(k, [&](const std::string& key, const std::string& doc) { out[key] = doc; }).ok());
    return out;
  }

  std::filesystem::path dir_;
};

TEST_F(StoreTest, CommittedDocumentsSurviveReopen) {
  {
    auto s = OpenSqliteStore(db(), true);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE((*s)->Commit({{Kind::kServiceJob, "a", "{\"x\":1}"}, {Kind::kJobQueue, "q", "{}"}}).ok());
  }
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(All(**s, Kind::kServiceJob), (std::map<std::string, std::string>{{"a", "{\"x\":1}"}}));
  EXPECT_EQ(All(**s, Kind::kJobQueue).size(), 1u);
  EXPECT_TRUE(All(**s, Kind::kTrainingJob).empty());
}

TEST_F(StoreTest, LaterWriteReplacesAndEmptyDocDeletes) {
  auto s = OpenSqliteStore(db(), false);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Commit({{Kind::kMeta, "k", "1"}, {Kind::kMeta, "j", "2"}}).ok());
  ASSERT_TRUE((*s)->Commit({{Kind::kMeta, "k", "3"}, {Kind::kMeta, "j", ""}}).ok());
  EXPECT_EQ(All(**s, Kind::kMeta), (std::map<std::string, std::string>{{"k", "3"}}));
}

TEST_F(StoreTest, MigrationsRunOnceAndRecordTheVersion) {
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  int v = (*s)->SchemaVersion();
  EXPECT_GE(v, 1);
  s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->SchemaVersion(), v);
}

TEST_F(StoreTest, WarmPoolsHaveTheirOwnTableFromSchemaVersion4) {
  {
    auto s = OpenSqliteStore(db(), true);
    ASSERT_TRUE(s.ok());
    EXPECT_GE((*s)->SchemaVersion(), 4);
    ASSERT_TRUE((*s)->Commit({{Kind::kWarmPool, "wp-1", "{\"id\":\"wp-1\"}"}, {Kind::kTrainingJob, "j", "{}"}}).ok());
  }
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(All(**s, Kind::kWarmPool), (std::map<std::string, std::string>{{"wp-1", "{\"id\":\"wp-1\"}"}}));
  ASSERT_TRUE((*s)->Commit({{Kind::kWarmPool, "wp-1", ""}}).ok());  // a terminated pool is deleted
  EXPECT_TRUE(All(**s, Kind::kWarmPool).empty());
  EXPECT_EQ(All(**s, Kind::kTrainingJob).size(), 1u);
}

TEST_F(StoreTest, SystemMetricsHaveTheirOwnTableFromSchemaVersion6) {
  {
    auto s = OpenSqliteStore(db(), true);
    ASSERT_TRUE(s.ok());
    EXPECT_GE((*s)->SchemaVersion(), 6);
    ASSERT_TRUE((*s)->Commit({{Kind::kSystemMetrics, "job", "{\"algo-1\":[]}"}, {Kind::kMetricSeries, "job", "[]"}}).ok());
  }
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(All(**s, Kind::kSystemMetrics), (std::map<std::string, std::string>{{"job", "{\"algo-1\":[]}"}}));
  EXPECT_EQ(All(**s, Kind::kMetricSeries), (std::map<std::string, std::string>{{"job", "[]"}}));
}

// Audit records are committed with the state (Kind::kAudit), keyed by time, and read newest first
// and pruned through the event log's connection.
TEST_F(StoreTest, AuditRecordsAreReadNewestFirstWithinARangeAndPrunedByAgeAndCount) {
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->SchemaVersion(), 8);
  std::vector<Write> writes;
  // Records at t = 1 s .. 12 s; 9 s < 10 s as numbers and as keys.
  for (int64_t t = 1; t <= 12; ++t) writes.push_back({Kind::kAudit, EventLog::AuditKey(t * 1000, "r" + std::to_string(t)), std::to_string(t)});
  ASSERT_TRUE((*s)->Commit(writes).ok());
  auto log = EventLog::Open(db());
  ASSERT_TRUE(log.ok());
  auto docs = [](const std::vector<std::pair<std::string, std::string>>& rows) {
    std::vector<std::string> out;
    for (const auto& [k, d] : rows) out.push_back(d);
    return out;
  };
  std::vector<std::pair<std::string, std::string>> rows;
  // [8 s, 11 s): newest first, at most 2.
  ASSERT_TRUE((*log)->ReadAudit(EventLog::AuditKey(8000, ""), EventLog::AuditKey(11000, ""), 2, &rows).ok());
  EXPECT_EQ(docs(rows), (std::vector<std::string>{"10", "9"}));
  // The next page goes on below the last key read.
  const std::string below = rows.back().first;
  rows.clear();
  ASSERT_TRUE((*log)->ReadAudit(EventLog::AuditKey(8000, ""), below, 2, &rows).ok());
  EXPECT_EQ(docs(rows), (std::vector<std::string>{"8"}));
  // Older than 3 s go, then all but the newest 5.
  auto gone = (*log)->PruneAudit(100, 3000);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_EQ(*gone, 2);
  gone = (*log)->PruneAudit(5, 0);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_EQ(*gone, 5);
  rows.clear();
  ASSERT_TRUE((*log)->ReadAudit(EventLog::AuditKey(0, ""), EventLog::AuditKey(1000000, ""), 100, &rows).ok());
  EXPECT_EQ(docs(rows), (std::vector<std::string>{"12", "11", "10", "9", "8"}));
}

// Events are committed with the state (Kind::kEvent) and read, waited for, tracked and pruned
// through the event log's own connection.
TEST_F(StoreTest, EventLogReadsInSequenceOrderKeepsCursorsAndPrunes) {
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  std::vector<Write> writes;
  for (uint64_t seq = 1; seq <= 12; ++seq)  // 9 < 10 < 11 as numbers, not as strings
    writes.push_back({Kind::kEvent, EventLog::Key(seq), "{\"seq\":" + std::to_string(seq) + ",\"at\":" + std::to_string(seq * 1000) + "}"});
  ASSERT_TRUE((*s)->Commit(writes).ok());
  auto log = EventLog::Open(db());
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ((*log)->LastPublished(), 12u);
  std::vector<StoredEvent> got;
  ASSERT_TRUE((*log)->Read(8, 3, &got).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].seq, 9u);
  EXPECT_EQ(got[2].seq, 11u);
  EXPECT_EQ(got[2].doc, "{\"seq\":11,\"at\":11000}");
  // A waiter wakes when newer events are published, and not before.
  auto soon = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  EXPECT_EQ((*log)->WaitNewer(12, soon), 12u);
  (*log)->Published(13);
  EXPECT_EQ((*log)->WaitNewer(12, std::chrono::steady_clock::now() + std::chrono::seconds(5)), 13u);
  bool found = true;
  auto c = (*log)->LoadCursor("webhook/a", &found);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(found);
  ASSERT_TRUE((*log)->SaveCursor("webhook/a", 7).ok());
  c = (*log)->LoadCursor("webhook/a", &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(*c, 7u);
  // Keep the newest 10, then drop those before t = 5 s.
  auto gone = (*log)->Prune(10, 0);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_EQ(*gone, 2);
  EXPECT_EQ(*(*log)->OldestStored(), 3u);
  gone = (*log)->Prune(100, 5000);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(*gone, 2);
  EXPECT_EQ(*(*log)->OldestStored(), 5u);
  EXPECT_EQ(*(*log)->NewestStored(), 12u);
}

TEST_F(StoreTest, OpeningAnUnwritablePathFails) {
  auto s = OpenSqliteStore((dir_ / "missing" / "x.db").string(), true);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace ty::store
