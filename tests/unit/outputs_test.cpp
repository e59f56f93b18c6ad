// Where an attempt's output archive is packed before its upload: in the directory it is given off
// the host's disk (the first instance's storage volume), else, or when packing there fails, in the
// attempt directory; either way nothing of it is left behind, and the object is the same.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exec/local/data.h"
#include "exec/local/attempt_files.h"
#include "exec/local/outputs.h"

namespace ty::exec::local {
namespace {

namespace fs = std::filesystem;

class UploadOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ty-outputs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "buckets" / "bkt");
    fs::create_directories(root_ / "volume");
    attempt_ = (root_ / "attempt").string();
    fs::create_directories(HostDir(attempt_, 1) + "/model");
    std::ofstream(HostDir(attempt_, 1) + "/model/weights.bin") << "weights";
    mover_ = std::make_unique<DataMover>(ObjectStoreConfig{}, (root_ / "buckets").string(), "");
  }
  void TearDown() override { fs::remove_all(root_); }

  Status Upload(const std::string& pack_dir) {
    OutputUpload out{attempt_, pack_dir, 1, "model", "model.tar.gz", "s3://bkt/job/output/", true};
    return UploadOutput(*mover_, out, [&](int, const std::string& rel, const std::string&) { skipped_.push_back(rel); });
  }

  bool Uploaded() const { return fs::is_regular_file(root_ / "buckets" / "bkt" / "job" / "output" / "model.tar.gz"); }

  fs::path root_;
  std::string attempt_;
  std::unique_ptr<DataMover> mover_;
  std::vector<std::string> skipped_;
};

TEST_F(UploadOutputTest, AnArchivePackedInThePackDirLeavesNothingThereOrInTheAttemptDir) {
  ASSERT_TRUE(Upload((root_ / "volume").string()).ok());
  EXPECT_TRUE(Uploaded());
  EXPECT_TRUE(fs::is_empty(root_ / "volume"));
  EXPECT_FALSE(fs::exists(attempt_ + "/model.tar.gz"));
}

TEST_F(UploadOutputTest, PackingFallsBackToTheAttemptDirWhenThePackDirFails) {
  ASSERT_TRUE(Upload((root_ / "no-such-volume").string()).ok());
  EXPECT_TRUE(Uploaded());
  EXPECT_FALSE(fs::exists(attempt_ + "/model.tar.gz"));
  EXPECT_TRUE(skipped_.empty());
}

TEST_F(UploadOutputTest, WithoutAPackDirTheArchiveIsPackedInTheAttemptDir) {
  ASSERT_TRUE(Upload("").ok());
  EXPECT_TRUE(Uploaded());
  EXPECT_FALSE(fs::exists(attempt_ + "/model.tar.gz"));
}

}  // namespace
}  // namespace ty::exec::local
