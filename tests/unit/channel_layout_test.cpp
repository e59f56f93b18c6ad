// Where an S3Prefix channel's objects land under /opt/ml/input/data/<channel>/: SageMaker's
// layout (the key minus the whole prefix, with or without a trailing '/'), keys that map to no
// safe path, and keys that would collide.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exec/local/data.h"

namespace ty::exec::local {
namespace {

namespace fs = std::filesystem;

TEST(ChannelPath, TheWholePrefixIsStrippedWithOrWithoutTrailingSlash) {
  EXPECT_EQ(ChannelPath("data/train", "data/train/a.csv"), "a.csv");
  EXPECT_EQ(ChannelPath("data/train/", "data/train/a.csv"), "a.csv");
  EXPECT_EQ(ChannelPath("data/train", "data/train/sub/b.csv"), "sub/b.csv");
  EXPECT_EQ(ChannelPath("data/train/", "data/train/sub/b.csv"), "sub/b.csv");
  EXPECT_EQ(ChannelPath("", "data/train/a.csv"), "data/train/a.csv");  // s3://bucket: the whole key
}

TEST(ChannelPath, APrefixEndingMidNameKeepsTheRestOfTheName) {
  EXPECT_EQ(ChannelPath("data/tra", "data/train/a.csv"), "in/a.csv");
  EXPECT_EQ(ChannelPath("data/tra", "data/trainer.csv"), "iner.csv");
}

TEST(ChannelPath, AKeyEqualToThePrefixIsPlacedUnderItsOwnName) {
  EXPECT_EQ(ChannelPath("data/train.csv", "data/train.csv"), "train.csv");
  EXPECT_EQ(ChannelPath("top.csv", "top.csv"), "top.csv");
}

TEST(ChannelPath, LeadingSlashesOfTheRemainderAreDropped) {
  EXPECT_EQ(ChannelPath("data/train", "data/train//a.csv"), "a.csv");
  EXPECT_EQ(ChannelPath("data/train/", "data/train//a.csv"), "a.csv");
}

TEST(ChannelPath, KeysWithNoSafePathAreNotStaged) {
  EXPECT_EQ(ChannelPath("data/train", "other/a.csv"), "");            // not under the prefix
  EXPECT_EQ(ChannelPath("data/train/", "data/train"), "");            // shorter than the prefix
  EXPECT_EQ(ChannelPath("data/train", "data/train/../x"), "");        // '..' segment
  EXPECT_EQ(ChannelPath("data/train", "data/train/a/./b"), "");       // '.' segment
  EXPECT_EQ(ChannelPath("data/train", "data/train/a//b"), "");        // empty segment
  EXPECT_EQ(ChannelPath("data/train", "data/train/.."), "");
  EXPECT_EQ(ChannelPath("data/train", "data/train//"), "");           // nothing left
  EXPECT_EQ(ChannelPath("data/train", "data/train/sub/"), "");        // a folder marker
}

// ListChannel against the embedded store: what a job's channel directory will hold.
class ListChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ty-channel-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "buckets" / "bkt");
    fs::create_directories(root_ / "scratch");
    mover_ = std::make_unique<DataMover>(ObjectStoreConfig{}, (root_ / "buckets").string(), "");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Put(const std::string& key, const std::string& body) {
    fs::path p = root_ / "buckets" / "bkt" / key;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << body;
  }

  Status List(const std::string& uri, std::vector<std::string>* rels, std::vector<std::string>* keys = nullptr) {
    Channel ch;
    ch.name = "train";
    ch.uri = uri;
    std::vector<InputItem> items;
    Status st = mover_->ListChannel(ch, (root_ / "scratch").string(), &items);
    rels->clear();
    for (const auto& it : items) {
      rels->push_back(it.rel);
      if (keys) keys->push_back(it.key);
    }
    return st;
  }

  fs::path root_;
  std::unique_ptr<DataMover> mover_;
};

using Rels = std::vector<std::string>;

TEST_F(ListChannelTest, BothUriFormsGiveTheSameLayout) {
  Put("data/train/a.csv", "1");
  Put("data/train/sub/b.csv", "2");
  Put("data/trainx/not-mine.csv", "3");
  Rels rels;
  ASSERT_TRUE(List("s3://bkt/data/train/", &rels).ok());
  EXPECT_EQ(rels, (Rels{"a.csv", "sub/b.csv"}));
  // Without the slash the prefix also matches data/trainx/: SageMaker stages it as x/...
  ASSERT_TRUE(List("s3://bkt/data/train", &rels).ok());
  EXPECT_EQ(rels, (Rels{"a.csv", "sub/b.csv", "x/not-mine.csv"}));
}

TEST_F(ListChannelTest, APrefixEndingMidNameAndAnObjectNamedByTheUri) {
  Put("data/train/a.csv", "1");
  Put("data/trainer.csv", "2");
  Rels rels;
  ASSERT_TRUE(List("s3://bkt/data/tra", &rels).ok());
  EXPECT_EQ(rels, (Rels{"in/a.csv", "iner.csv"}));
  ASSERT_TRUE(List("s3://bkt/data/trainer.csv", &rels).ok());
  EXPECT_EQ(rels, (Rels{"trainer.csv"}));
}

TEST_F(ListChannelTest, TwoKeysOnOnePathFailNamingBoth) {
  Put("data/x", "the object the URI names");
  Put("data/xx", "placed at x as well");
  Rels rels;
  Status st = List("s3://bkt/data/x", &rels);
  ASSERT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("'data/x' and 'data/xx'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("same file 'x'"), std::string::npos) << st.message();
}

TEST_F(ListChannelTest, AFileWhereAnotherKeyNeedsADirectoryFails) {
  Put("data/t", "the object the URI names, placed at t");
  Put("data/tt/a.csv", "needs t/ as a directory");
  Rels rels;
  Status st = List("s3://bkt/data/t", &rels);
  ASSERT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("needs as a directory"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'data/tt/a.csv'"), std::string::npos) << st.message();
}

TEST_F(ListChannelTest, NothingUnderThePrefixIsNotFound) {
  Put("data/train/a.csv", "1");
  Rels rels;
  EXPECT_EQ(List("s3://bkt/data/test", &rels).code(), Code::kNotFound);
}

}  // namespace
}  // namespace ty::exec::local
