// Archives and job trees as the supervisor meets them: hostile. Tarballs are crafted here with
// libarchive's writer (which writes whatever name, link or type it is given), trees with links,
// FIFOs and files the walk must not follow or open.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "exec/local/archive.h"
#include "exec/local/job_tree.h"

namespace ty::exec::local {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// One entry of a crafted tarball.
struct Member {
  std::string name;
  mode_t type = AE_IFREG;
  std::string data;          // regular files
  std::string link;          // symbolic links: the target
  std::string hardlink;      // hard links: the earlier entry
  mode_t perm = 0644;
};

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainyard-archive-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dest_ = root_ / "code";
    outside_ = root_ / "outside";
    fs::create_directories(dest_);
    fs::create_directories(outside_);
    Write(root_ / "secret", "root-secret-value");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);  // never follows the links the tests made
  }

  // A gzip-compressed tar of `members`, written verbatim.
  std::string Tarball(const std::vector<Member>& members) {
    const std::string path = (root_ / ("crafted-" + std::to_string(++made_) + ".tar.gz")).string();
    archive* a = archive_write_new();
    archive_write_add_filter_gzip(a);
    archive_write_set_format_pax_restricted(a);
    EXPECT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
    for (const auto& m : members) {
      archive_entry* e = archive_entry_new();
      archive_entry_copy_pathname(e, m.name.c_str());
      archive_entry_set_filetype(e, m.type);
      archive_entry_set_perm(e, m.perm);
      if (!m.link.empty()) archive_entry_copy_symlink(e, m.link.c_str());
      if (!m.hardlink.empty()) archive_entry_copy_hardlink(e, m.hardlink.c_str());
      archive_entry_set_size(e, m.type == AE_IFREG && m.hardlink.empty() ? static_cast<la_int64_t>(m.data.size()) : 0);
      EXPECT_GE(archive_write_header(a, e), ARCHIVE_WARN) << archive_error_string(a);
      if (!m.data.empty()) archive_write_data(a, m.data.data(), m.data.size());
      archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    return path;
  }

  // name -> contents ("<dir>" for directories) of a .tar.gz, read with libarchive.
  static std::map<std::string, std::string> Contents(const std::string& path) {
    std::map<std::string, std::string> out;
    archive* a = archive_read_new();
    archive_read_support_filter_gzip(a);
    archive_read_support_format_tar(a);
    EXPECT_EQ(archive_read_open_filename(a, path.c_str(), 1 << 16), ARCHIVE_OK) << archive_error_string(a);
    archive_entry* e;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
      std::string data;
      if (archive_entry_filetype(e) == AE_IFDIR) {
        data = "<dir>";
      } else {
        EXPECT_EQ(archive_entry_filetype(e), static_cast<mode_t>(AE_IFREG)) << archive_entry_pathname(e);
        char buf[4096];
        la_ssize_t n;
        while ((n = archive_read_data(a, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
      }
      out[archive_entry_pathname(e)] = data;
    }
    archive_read_free(a);
    return out;
  }

  Status Extract(const std::string& tarball, ExtractLimits limits = {}) {
    return ExtractTarGz(tarball, dest_.string(), limits);
  }

  fs::path root_, dest_, outside_;
  int made_ = 0;
};

// ---- unpacking ----

TEST_F(ArchiveTest, UnpacksFilesDirectoriesAndLinksInsideTheTree) {
  auto tarball = Tarball({{"./", AE_IFDIR},
                          {"./train.py", AE_IFREG, "print('hi')\n", "", "", 0755},
                          {"./lib/", AE_IFDIR},
                          {"./lib/util.py", AE_IFREG, "x = 1\n"},
                          {"./lib/shared", AE_IFLNK, "", "../train.py"},
                          {"./alias.py", AE_IFREG, "", "", "lib/util.py"}});
  ASSERT_TRUE(Extract(tarball).ok());
  EXPECT_EQ(Slurp(dest_ / "train.py"), "print('hi')\n");
  EXPECT_EQ(Slurp(dest_ / "lib/util.py"), "x = 1\n");
  EXPECT_EQ(fs::read_symlink(dest_ / "lib/shared"), "../train.py");
  EXPECT_EQ(Slurp(dest_ / "alias.py"), "x = 1\n");
  EXPECT_EQ(fs::status(dest_ / "train.py").permissions() & fs::perms::owner_exec, fs::perms::owner_exec);
}

TEST_F(ArchiveTest, DropsSetuidBitsAndWritePermissionForOthers) {
  ASSERT_TRUE(Extract(Tarball({{"tool", AE_IFREG, "#!/bin/sh\n", "", "", 06777}})).ok());
  struct stat st {};
  ASSERT_EQ(::stat((dest_ / "tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, ::getuid());  // no ownership restored
}

TEST_F(ArchiveTest, RefusesAnAbsoluteName) {
  const std::string target = (outside_ / "planted").string();
  Status st = Extract(Tarball({{"ok.py", AE_IFREG, "1"}, {target, AE_IFREG, "pwned"}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry '" + target + "' has an absolute name"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(ArchiveTest, RefusesADotDotComponent) {
  Status st = Extract(Tarball({{"a/../../outside/planted", AE_IFREG, "pwned"}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'a/../../outside/planted' has a '..' component"), std::string::npos)
      << st.message();
  EXPECT_FALSE(fs::exists(outside_ / "planted"));
}

TEST_F(ArchiveTest, RefusesALinkToAnAbsolutePathThenAWriteThroughIt) {
  // The classic: a link to a directory outside, then a file "through" it.
  Status st = Extract(Tarball({{"escape", AE_IFLNK, "", outside_.string()}, {"escape/planted", AE_IFREG, "pwned"}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'escape' is a symbolic link to the absolute path " + outside_.string()),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(fs::exists(outside_ / "planted"));
  EXPECT_FALSE(fs::is_symlink(dest_ / "escape"));
}

TEST_F(ArchiveTest, RefusesALinkThatClimbsOut) {
  Status st = Extract(Tarball({{"d/", AE_IFDIR}, {"d/up", AE_IFLNK, "", "../../outside"}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'd/up' is a symbolic link to ../../outside, which leads out"), std::string::npos)
      << st.message();
}

TEST_F(ArchiveTest, RefusesDotDotAfterALinkedName) {
  // "here" -> "." is inside; "there" -> "here/.." would be the parent of the tree.
  Status st = Extract(Tarball({{"here", AE_IFLNK, "", "."}, {"there", AE_IFLNK, "", "here/.."}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'there' is a symbolic link to here/.., with '..' after a name"),
            std::string::npos)
      << st.message();
}

TEST_F(ArchiveTest, RefusesAWriteThroughALinkInsideTheTree) {
  // Even a link that stays inside is never written through: what it points at could change.
  Status st = Extract(Tarball({{"sub/", AE_IFDIR}, {"l", AE_IFLNK, "", "sub"}, {"l/x", AE_IFREG, "data"}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'l/x' cannot be unpacked"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dest_ / "sub/x"));
}

TEST_F(ArchiveTest, RefusesFifosDevicesAndSockets) {
  for (auto [type, what] : {std::pair<mode_t, const char*>{AE_IFIFO, "a FIFO"},
                            {AE_IFCHR, "a character device"},
                            {AE_IFBLK, "a block device"}}) {
    Status st = Extract(Tarball({{"node", type}}));
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(std::string("entry 'node' is ") + what), std::string::npos) << st.message();
    EXPECT_FALSE(fs::exists(fs::symlink_status(dest_ / "node")));
  }
}

TEST_F(ArchiveTest, RefusesAHardLinkToAFileOutside) {
  Status st = Extract(Tarball({{"h", AE_IFREG, "", "", (root_ / "secret").string()}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'h' is a hard link"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dest_ / "h"));
}

TEST_F(ArchiveTest, RefusesAHardLinkToALink) {
  // A hard link to a symbolic link is that link moved elsewhere: "d/up" -> "../x" is inside from
  // d/, but not from the top.
  Status st = Extract(Tarball({{"d/", AE_IFDIR}, {"d/up", AE_IFLNK, "", "../x"}, {"moved", AE_IFREG, "", "", "d/up"}}));
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'moved' is a hard link to 'd/up', which is not a regular file"),
            std::string::npos)
      << st.message();
}

TEST_F(ArchiveTest, StopsAtTheSizeLimit) {
  ExtractLimits limits;
  limits.max_bytes = 1000;
  Status st = Extract(Tarball({{"small", AE_IFREG, std::string(600, 'a')}, {"big", AE_IFREG, std::string(600, 'b')}}),
                      limits);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'big' is past the limit of 1000 bytes"), std::string::npos) << st.message();
}

TEST_F(ArchiveTest, StopsAtTheEntryLimit) {
  ExtractLimits limits;
  limits.max_entries = 2;
  Status st = Extract(Tarball({{"a", AE_IFREG, "1"}, {"b", AE_IFREG, "2"}, {"c", AE_IFREG, "3"}}), limits);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("entry 'c' is past the limit of 2 entries"), std::string::npos) << st.message();
}

TEST_F(ArchiveTest, RefusesWhatIsNotAGzippedTar) {
  Write(root_ / "junk.tar.gz", "this is not an archive");
  Status st = Extract((root_ / "junk.tar.gz").string());
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST_F(ArchiveTest, LeavesTheWorkingDirectoryAsItWas) {
  const fs::path before = fs::current_path();
  ASSERT_TRUE(Extract(Tarball({{"a", AE_IFREG, "1"}})).ok());
  EXPECT_EQ(fs::current_path(), before);
  EXPECT_FALSE(Extract(Tarball({{"../a", AE_IFREG, "1"}})).ok());
  EXPECT_EQ(fs::current_path(), before);
}

// ---- packing ----

TEST_F(ArchiveTest, PacksRegularFilesAndDirectoriesOnlyWithoutFollowingLinks) {
  const fs::path model = root_ / "algo-1/model";
  Write(model / "weights.bin", "weights");
  Write(model / "sub/config.json", "{}");
  fs::create_symlink(root_ / "secret", model / "stolen");          // a link to a file outside
  fs::create_directory_symlink(outside_, model / "outside-dir");    // ... to a directory outside
  fs::create_directory_symlink("../../..", model / "up");           // ... climbing
  ASSERT_EQ(::mkfifo((model / "pipe").c_str(), 0644), 0);
  std::vector<std::string> skipped;
  const std::string out = (root_ / "model.tar.gz").string();
  auto started = std::chrono::steady_clock::now();
  Status st = CreateTarGz(out, {{(root_ / "algo-1").string(), "model"}}, WalkOptions{},
                          [&](size_t dir, const std::string& rel, const std::string& why) {
                            EXPECT_EQ(dir, 0u);
                            skipped.push_back(rel + ": " + why);
                          });
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));  // the FIFO was not opened
  std::map<std::string, std::string> expected = {
      {"./", "<dir>"}, {"./sub/", "<dir>"}, {"./sub/config.json", "{}"}, {"./weights.bin", "weights"}};
  EXPECT_EQ(Contents(out), expected);
  EXPECT_EQ(skipped, (std::vector<std::string>{"outside-dir: is a symbolic link (links are not followed)",
                                               "pipe: is a FIFO (only regular files are read)",
                                               "stolen: is a symbolic link (links are not followed)",
                                               "up: is a symbolic link (links are not followed)"}));
}

TEST_F(ArchiveTest, PacksSeveralInstancesAndMissingDirectoriesIntoOneArchive) {
  Write(root_ / "algo-1/output/data/a", "1");
  Write(root_ / "algo-2/output/data/b", "2");
  const std::string out = (root_ / "output.tar.gz").string();
  ASSERT_TRUE(CreateTarGz(out,
                          {{(root_ / "algo-1").string(), "output/data"},
                           {(root_ / "algo-2").string(), "output/data"},
                           {(root_ / "algo-3").string(), "output/data"}},
                          WalkOptions{}, nullptr)
                  .ok());
  std::map<std::string, std::string> expected = {{"./", "<dir>"}, {"./a", "1"}, {"./b", "2"}};
  EXPECT_EQ(Contents(out), expected);
}

TEST_F(ArchiveTest, NoOutputIsAValidEmptyArchive) {
  const std::string out = (root_ / "empty.tar.gz").string();
  ASSERT_TRUE(CreateTarGz(out, {{(root_ / "algo-1").string(), "model"}}, WalkOptions{}, nullptr).ok());
  EXPECT_TRUE(Contents(out).empty());
  EXPECT_GT(fs::file_size(out), 0u);
}

TEST_F(ArchiveTest, AModelDirectoryReplacedByALinkIsLeftOutWhole) {
  fs::create_directories(root_ / "algo-1");
  fs::create_directory_symlink(outside_, root_ / "algo-1/model");
  Write(outside_ / "loot", "outside");
  std::vector<std::string> skipped;
  const std::string out = (root_ / "model.tar.gz").string();
  ASSERT_TRUE(CreateTarGz(out, {{(root_ / "algo-1").string(), "model"}}, WalkOptions{},
                          [&](size_t, const std::string& rel, const std::string& why) { skipped.push_back(why); })
                  .ok());
  EXPECT_TRUE(Contents(out).empty());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("model is a symbolic link"), std::string::npos) << skipped[0];
}

// ---- reading and writing single files of a job's tree ----

TEST_F(ArchiveTest, ReadsARegularFileUpToTheCap) {
  Write(root_ / "algo-1/output/failure", std::string(5000, 'x'));
  std::string text;
  ASSERT_TRUE(ReadJobFile({(root_ / "algo-1").string(), "output"}, "failure", 1024, &text).ok());
  EXPECT_EQ(text, std::string(1024, 'x'));
}

TEST_F(ArchiveTest, DoesNotReadAFailureFileThatIsALink) {
  fs::create_directories(root_ / "algo-1/output");
  fs::create_symlink(root_ / "secret", root_ / "algo-1/output/failure");
  std::string text;
  Status st = ReadJobFile({(root_ / "algo-1").string(), "output"}, "failure", 1024, &text);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("failure is a symbolic link"), std::string::npos) << st.message();
  EXPECT_EQ(text, "");
}

TEST_F(ArchiveTest, DoesNotReadThroughALinkedDirectory) {
  fs::create_directories(root_ / "algo-1");
  Write(outside_ / "failure", "root-secret-value");
  fs::create_directory_symlink(outside_, root_ / "algo-1/output");
  std::string text;
  Status st = ReadJobFile({(root_ / "algo-1").string(), "output"}, "failure", 1024, &text);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("output is a symbolic link"), std::string::npos) << st.message();
  EXPECT_EQ(text, "");
}

TEST_F(ArchiveTest, DoesNotBlockOnAFifo) {
  fs::create_directories(root_ / "algo-1/output");
  ASSERT_EQ(::mkfifo((root_ / "algo-1/output/failure").c_str(), 0644), 0);
  std::string text;
  auto started = std::chrono::steady_clock::now();
  Status st = ReadJobFile({(root_ / "algo-1").string(), "output"}, "failure", 1024, &text);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("failure is a FIFO"), std::string::npos) << st.message();
}

TEST_F(ArchiveTest, AMissingFileIsNotFound) {
  std::string text;
  EXPECT_EQ(ReadJobFile({(root_ / "algo-1").string(), "output"}, "failure", 1024, &text).code(), Code::kNotFound);
}

TEST_F(ArchiveTest, WritingReplacesALinkInsteadOfWritingThroughIt) {
  const fs::path host = root_ / "algo-1";
  fs::create_directories(host);
  fs::create_symlink(root_ / "secret", host / "interruption-notice");
  fs::create_symlink(root_ / "secret", host / "interruption-notice.tmp");
  ASSERT_TRUE(WriteJobFile({host.string(), ""}, "interruption-notice", "{\"action\":\"terminate\"}\n").ok());
  EXPECT_EQ(Slurp(root_ / "secret"), "root-secret-value");
  EXPECT_FALSE(fs::is_symlink(host / "interruption-notice"));
  EXPECT_EQ(Slurp(host / "interruption-notice"), "{\"action\":\"terminate\"}\n");
}

TEST_F(ArchiveTest, WalkNamesFilesByThePathWalkedAndStopsAtTheEntryLimit) {
  const fs::path ck = root_ / "algo-1/checkpoints";
  Write(ck / "a", "1");
  Write(ck / "b/c", "2");
  Write(ck / "d", "3");
  fs::create_symlink(root_ / "secret", ck / "b/link");
  std::vector<std::string> seen, skipped;
  WalkResult result;
  ASSERT_TRUE(WalkJobTree({(root_ / "algo-1").string(), "checkpoints"}, WalkOptions{},
                          [&](const JobFile& f) {
                            seen.push_back(f.rel);
                            return Status::Ok();
                          },
                          [&](const std::string& rel, const std::string&) { skipped.push_back(rel); }, &result)
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b/c", "d"}));
  EXPECT_EQ(skipped, std::vector<std::string>{"b/link"});
  EXPECT_TRUE(result.complete);

  WalkOptions few;
  few.max_entries = 2;  // "a", "b"; then "b/c" is one too many
  seen.clear();
  ASSERT_TRUE(WalkJobTree({(root_ / "algo-1").string(), "checkpoints"}, few,
                          [&](const JobFile& f) {
                            seen.push_back(f.rel);
                            return Status::Ok();
                          },
                          nullptr, &result)
                  .ok());
  EXPECT_EQ(seen, std::vector<std::string>{"a"});
  EXPECT_FALSE(result.complete);
}

}  // namespace
}  // namespace ty::exec::local
