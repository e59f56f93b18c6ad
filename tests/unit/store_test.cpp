#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

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

TEST_F(StoreTest, SystemMetricsHaveTheirOwnTableFromSchemaVersion5) {
  {
    auto s = OpenSqliteStore(db(), true);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->SchemaVersion(), 5);
    ASSERT_TRUE((*s)->Commit({{Kind::kSystemMetrics, "job", "{\"algo-1\":[]}"}, {Kind::kMetricSeries, "job", "[]"}}).ok());
  }
  auto s = OpenSqliteStore(db(), true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(All(**s, Kind::kSystemMetrics), (std::map<std::string, std::string>{{"job", "{\"algo-1\":[]}"}}));
  EXPECT_EQ(All(**s, Kind::kMetricSeries), (std::map<std::string, std::string>{{"job", "[]"}}));
}

TEST_F(StoreTest, OpeningAnUnwritablePathFails) {
  auto s = OpenSqliteStore((dir_ / "missing" / "x.db").string(), true);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace ty::store
