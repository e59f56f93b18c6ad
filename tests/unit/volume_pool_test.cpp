// The pool of storage volume images (exec/local/volume.h): what survives a restart of the server
// and what goes when the disk runs short. Needs no root: the pool is plain files.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "exec/local/volume.h"

namespace ty::exec::local {
namespace {

namespace fs = std::filesystem;

class VolumePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ty-volume-pool-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    run_ = tmpl;
    current_ = VolumePoolDir(run_);
    ASSERT_FALSE(current_.empty());
    Image(current_ + "/1073741824/1.img");
    Image(current_ + "/2147483648/2.img");
    Image(run_ + "/volume-pool/an-earlier-boot/1073741824/3.img");
  }
  void TearDown() override { fs::remove_all(run_); }

  static void Image(const std::string& path) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << "image";
  }

  std::string run_, current_;
};

TEST_F(VolumePoolTest, AServerStartKeepsThisBootsImagesAndDeletesEarlierBoots) {
  DiscardVolumePool(run_, run_ + "/volumes.lock", false);
  EXPECT_TRUE(fs::exists(current_ + "/1073741824/1.img"));
  EXPECT_TRUE(fs::exists(current_ + "/2147483648/2.img"));
  EXPECT_FALSE(fs::exists(run_ + "/volume-pool/an-earlier-boot"));
}

TEST_F(VolumePoolTest, ReleasingIdleSpaceDeletesEveryPooledImage) {
  EXPECT_GT(DiscardVolumePool(run_, run_ + "/volumes.lock", true), 0);
  EXPECT_FALSE(fs::exists(current_ + "/1073741824/1.img"));
  EXPECT_FALSE(fs::exists(current_ + "/2147483648/2.img"));
  EXPECT_FALSE(fs::exists(run_ + "/volume-pool/an-earlier-boot"));
}

TEST(RemoveLeftoverImages, AKilledSupervisorsImagesGoAndNothingElse) {
  char tmpl[] = "/tmp/ty-leftover-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string attempt = tmpl;
  fs::create_directories(attempt + "/volumes/algo-1");
  std::ofstream(attempt + "/volumes/algo-1.img") << "image";
  std::ofstream(attempt + "/status.json") << "{}";
  RemoveLeftoverImages(attempt);
  EXPECT_FALSE(fs::exists(attempt + "/volumes/algo-1.img"));
  EXPECT_TRUE(fs::exists(attempt + "/volumes/algo-1"));
  EXPECT_TRUE(fs::exists(attempt + "/status.json"));
  fs::remove_all(attempt);
}

}  // namespace
}  // namespace ty::exec::local
