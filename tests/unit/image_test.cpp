// exec/image: the reference parser, the cache's index file, the mount points made in an unpacked
// root, and how an image's config combines with an attempt's command (docs/images.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "exec/attempt_spec.h"
#include "exec/image/cache.h"
#include "exec/image/command.h"
#include "exec/image/reference.h"

namespace ty::exec::image {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using T = ImageReference::Transport;

const std::string kDigest = "sha256:" + std::string(64, 'a');

ImageReference Parsed(const std::string& text) {
  auto r = ParseImageReference(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? *r : ImageReference{};
}

std::string Refusal(const std::string& text) {
  auto r = ParseImageReference(text);
  EXPECT_FALSE(r.ok()) << text << " was accepted as " << (r.ok() ? r->Skopeo() : "");
  EXPECT_TRUE(r.ok() || r.status().code() == Code::kInvalidArgument);
  return r.ok() ? "" : r.status().message();
}

TEST(ImageReference, RegistryReferencesAreNormalisedToOneKey) {
  EXPECT_EQ(Parsed("busybox").Skopeo(), "docker://busybox:latest");
  EXPECT_EQ(Parsed("docker://busybox").Skopeo(), "docker://busybox:latest");
  EXPECT_EQ(Parsed("docker://busybox:latest").Skopeo(), "docker://busybox:latest");
  EXPECT_EQ(Parsed("registry.example.com:5000/team/train:v1.2").Skopeo(),
            "docker://registry.example.com:5000/team/train:v1.2");
  EXPECT_EQ(Parsed("localhost:5000/train").Skopeo(), "docker://localhost:5000/train:latest");
  EXPECT_EQ(Parsed("repo@" + kDigest).Skopeo(), "docker://repo@" + kDigest);
  EXPECT_EQ(Parsed("repo:tag@" + kDigest).Skopeo(), "docker://repo:tag@" + kDigest);
  EXPECT_EQ(Parsed("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-cpu-py311").transport, T::kDocker);
}

TEST(ImageReference, LocalTransportsTakeAnAbsolutePathAndAnOptionalTag) {
  ImageReference oci = Parsed("oci:/srv/images/train:v1");
  EXPECT_EQ(oci.transport, T::kOci);
  EXPECT_EQ(oci.name, "/srv/images/train");
  EXPECT_EQ(oci.tag, "v1");
  EXPECT_EQ(oci.Skopeo(), "oci:/srv/images/train:v1");
  EXPECT_EQ(Parsed("oci:/srv/images/train").tag, "");
  EXPECT_EQ(Parsed("oci-archive:/srv/train.tar:v2").transport, T::kOciArchive);
  ImageReference archive = Parsed("docker-archive:/srv/train.tar");
  EXPECT_EQ(archive.transport, T::kDockerArchive);
  EXPECT_EQ(archive.name, "/srv/train.tar");
  EXPECT_EQ(Parsed("docker-archive:/srv/train.tar:train:v1").Skopeo(), "docker-archive:/srv/train.tar:train:v1");
}

TEST(ImageReference, RefusesWhatNoRuleAccepts) {
  EXPECT_THAT(Refusal(""), HasSubstr("empty"));
  EXPECT_THAT(Refusal("dir:/srv/image"), HasSubstr("transport 'dir:' is not supported"));
  EXPECT_THAT(Refusal("containers-storage:busybox"), HasSubstr("transport 'containers-storage:'"));
  EXPECT_THAT(Refusal("docker-daemon:busybox:latest"), HasSubstr("not supported"));
  EXPECT_THAT(Refusal("https://example.com/image"), HasSubstr("scheme 'https://' is not supported"));
  EXPECT_THAT(Refusal("oci:relative/layout:v1"), HasSubstr("absolute"));
  EXPECT_THAT(Refusal("oci:/srv/../etc:v1"), HasSubstr("'..'"));
  EXPECT_THAT(Refusal("oci:/srv/layout:bad tag"), HasSubstr("tag"));
  EXPECT_THAT(Refusal("Busybox"), HasSubstr("not a registry reference"));
  EXPECT_THAT(Refusal("repo@sha256:short"), HasSubstr("not a registry reference"));
  EXPECT_THAT(Refusal("repo:tag with space"), HasSubstr("not a registry reference"));
  EXPECT_THAT(Refusal("busy\nbox"), HasSubstr("control character"));
  EXPECT_THAT(Refusal(std::string(5000, 'a')), HasSubstr("longer than 4096"));
  // Every refusal says which forms are accepted.
  EXPECT_THAT(Refusal("dir:/x"), HasSubstr("use docker://host/repo:tag"));
}

// A path reference names a host file that skopeo reads as the server's user: only one inside
// executor.image_dirs is taken, and the refusal reads the same whether the path exists or not.
TEST(ImageLocation, APathReferenceMustBeInsideAnImageDirectory) {
  const std::vector<std::string> dirs = {"/srv/images/", "/data/oci"};
  EXPECT_TRUE(CheckImageLocation(Parsed("registry.example.com/team/train:v1"), {}).ok());
  EXPECT_TRUE(CheckImageLocation(Parsed("oci:/srv/images/train:v1"), dirs).ok());
  EXPECT_TRUE(CheckImageLocation(Parsed("oci-archive:/data/oci/sub/train.tar"), dirs).ok());
  EXPECT_TRUE(CheckImageLocation(Parsed("docker-archive:/data/oci/x.tar:repo/x:v1"), dirs).ok());
  for (const char* outside : {"oci:/etc", "oci:/srv/images", "oci:/srv/images-other/x:v1", "oci-archive:/data/ocifoo.tar",
                              "docker-archive:/etc/shadow", "oci:/srv/x/../images/y"}) {
    auto ref = ParseImageReference(outside);
    if (!ref.ok()) continue;  // '..' is refused by the parser already
    Status st = CheckImageLocation(*ref, dirs);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << outside;
    EXPECT_THAT(st.message(), HasSubstr("executor.image_dirs: /srv/images/, /data/oci")) << outside;
  }
  // Without image directories no path is taken at all.
  Status none = CheckImageLocation(Parsed("oci:/srv/images/train:v1"), {});
  EXPECT_EQ(none.code(), Code::kInvalidArgument);
  EXPECT_THAT(none.message(), HasSubstr("executor.image_dirs is empty"));
  // A file that exists and one that does not: the same answer but for the name.
  auto message_for = [](const std::string& path) {
    std::string m = CheckImageLocation(Parsed("oci-archive:" + path), {"/srv/images"}).message();
    return m.replace(m.find(path), path.size(), "PATH");
  };
  ASSERT_TRUE(fs::exists("/etc/passwd"));
  EXPECT_EQ(message_for("/etc/passwd"), message_for("/etc/no-such-file-here"));
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/image-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

using ImageIndex = TempDir;

TEST_F(ImageIndex, IsReplacedWholeAndReadBack) {
  const std::string path = dir_ + "/index.json";
  auto empty = ReadIndex(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  std::map<std::string, std::string> index = {{"docker://busybox:latest", kDigest}, {"oci:/srv/x:v1", kDigest}};
  ASSERT_TRUE(WriteIndex(path, index).ok());
  auto back = ReadIndex(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, index);
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ImageIndex, ACorruptIndexIsAnErrorNotAnEmptyCache) {
  const std::string path = dir_ + "/index.json";
  std::ofstream(path) << "{\"docker://busybox:latest\": \"not-a-digest\"}";
  EXPECT_FALSE(ReadIndex(path).ok());
  std::ofstream(path, std::ios::trunc) << "[1, 2";
  EXPECT_FALSE(ReadIndex(path).ok());
}

TEST_F(ImageIndex, LookupNeedsTheIndexTheRootAndTheConfig) {
  ImageCache cache(dir_, {"/nonexistent/skopeo", "/nonexistent/umoci", 5});
  ImageReference ref = Parsed("oci:/srv/layout:v1");
  EXPECT_EQ(cache.Lookup(ref).status().code(), Code::kNotFound);
  ASSERT_TRUE(WriteIndex(dir_ + "/index.json", {{ref.Skopeo(), kDigest}}).ok());
  EXPECT_EQ(cache.Lookup(ref).status().code(), Code::kNotFound);  // no rootfs yet
  fs::create_directories(dir_ + "/rootfs/" + kDigest);
  fs::create_directories(dir_ + "/config");
  std::ofstream(dir_ + "/config/" + kDigest + ".json") << EncodeImageConfig({{"/e"}, {"c"}, {"A=1"}, "/w", "u"});
  auto hit = cache.Lookup(ref);
  ASSERT_TRUE(hit.ok()) << hit.status().message();
  EXPECT_EQ(hit->rootfs, dir_ + "/rootfs/" + kDigest);
  EXPECT_EQ(hit->config.working_dir, "/w");
  // Get finds it without running the (missing) tools.
  auto got = cache.Get(ref);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_FALSE(got->copied);
  EXPECT_FALSE(got->unpacked);
}

TEST_F(ImageIndex, AFailedCopyCarriesTheToolsMessageAndLeavesNoEntry) {
  const std::string skopeo = dir_ + "/fake-skopeo";
  std::ofstream(skopeo) << "#!/bin/sh\necho 'reading manifest latest: manifest unknown' >&2\nexit 1\n";
  fs::permissions(skopeo, fs::perms::owner_all);
  ImageCache cache(dir_ + "/cache", {skopeo, "/nonexistent/umoci", 5});
  auto got = cache.Get(Parsed("registry.example.com/missing:v1"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("manifest unknown"));
  EXPECT_FALSE(fs::exists(dir_ + "/cache/index.json"));
}

TEST_F(ImageIndex, AToolPastItsDeadlineIsKilled) {
  std::string err;
  Status st = RunTool({"/bin/sh", "-c", "echo started >&2; sleep 30"}, 1, &err);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("did not finish within 1 s"));
}

// With the real skopeo and umoci, on an empty image made by `umoci new`: concurrent starts of
// one reference copy and unpack it once, and what a killed unpack left in tmp/ never shows as a
// root and is cleared by the next fetch.
using RealTools = TempDir;

TEST_F(RealTools, ConcurrentStartsUnpackOnceAndALeftoverIsSweptNotUsed) {
  std::string err;
  ASSERT_TRUE(RunTool({"umoci", "init", "--layout", dir_ + "/src"}, 60, &err).ok()) << err;
  ASSERT_TRUE(RunTool({"umoci", "new", "--image", dir_ + "/src:v1"}, 60, &err).ok()) << err;
  const std::string cache_dir = dir_ + "/cache";
  // A kill -9 mid-unpack: a half tree in tmp/, nothing in rootfs/ or the index.
  fs::create_directories(cache_dir + "/tmp/deadbeef.123/rootfs/bin");
  ImageReference ref = Parsed("oci:" + dir_ + "/src:v1");
  std::vector<StatusOr<CachedImage>> results(4, Status(Code::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] { results[i] = ImageCache(cache_dir).Get(ref); });
  for (auto& t : threads) t.join();
  int copied = 0, unpacked = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    copied += r->copied;
    unpacked += r->unpacked;
    EXPECT_EQ(r->digest, results[0]->digest);
  }
  EXPECT_EQ(copied, 1);
  EXPECT_EQ(unpacked, 1);
  EXPECT_TRUE(fs::is_empty(cache_dir + "/tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(cache_dir + "/rootfs"), fs::directory_iterator()), 1);
  EXPECT_TRUE(fs::is_directory(results[0]->rootfs + "/opt/ml"));
  EXPECT_EQ(*ReadIndex(cache_dir + "/index.json"), (std::map<std::string, std::string>{{ref.Skopeo(), results[0]->digest}}));
}

// An image's set-user-ID root binary never becomes one on the host: the unpacked root keeps
// no set-user-ID or set-group-ID bit, and the cache is the server's user's alone.
TEST_F(RealTools, AnImagesSetuidFilesLoseTheBitAndTheCacheIsPrivate) {
  std::string err;
  ASSERT_TRUE(RunTool({"umoci", "init", "--layout", dir_ + "/src"}, 60, &err).ok()) << err;
  ASSERT_TRUE(RunTool({"umoci", "new", "--image", dir_ + "/src:v1"}, 60, &err).ok()) << err;
  const std::string payload = dir_ + "/payload";
  std::ofstream(payload) << "#!/bin/sh\nid\n";
  ASSERT_EQ(::chmod(payload.c_str(), 06755), 0);
  for (const char* at : {"/usr/bin/su-like", "/usr/bin/sg-like"})
    ASSERT_TRUE(RunTool({"umoci", "insert", "--image", dir_ + "/src:v1", payload, at}, 60, &err).ok()) << err;
  const std::string cache_dir = dir_ + "/cache";
  fs::create_directories(cache_dir);
  ::chmod(cache_dir.c_str(), 0755);  // as an earlier version made it
  auto got = ImageCache(cache_dir).Get(Parsed("oci:" + dir_ + "/src:v1"));
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (const char* at : {"/usr/bin/su-like", "/usr/bin/sg-like"}) {
    struct stat sb {};
    ASSERT_EQ(::lstat((got->rootfs + at).c_str(), &sb), 0) << at;
    EXPECT_EQ(sb.st_mode & 07777, 0755u) << at;
  }
  struct stat cache {};
  ASSERT_EQ(::stat(cache_dir.c_str(), &cache), 0);
  EXPECT_EQ(cache.st_mode & 0777, 0700u);
}

using Privileges = TempDir;

TEST_F(Privileges, SetuidAndSetgidBitsAreClearedWithoutFollowingLinks) {
  const std::string root = dir_ + "/root";
  fs::create_directories(root + "/bin");
  fs::create_directories(root + "/shared");
  std::ofstream(root + "/bin/suid") << "x";
  std::ofstream(root + "/bin/sgid") << "x";
  std::ofstream(dir_ + "/outside") << "x";
  ASSERT_EQ(::chmod((root + "/bin/suid").c_str(), 04755), 0);
  ASSERT_EQ(::chmod((root + "/bin/sgid").c_str(), 02711), 0);
  ASSERT_EQ(::chmod((root + "/shared").c_str(), 02775), 0);
  ASSERT_EQ(::chmod((dir_ + "/outside").c_str(), 04755), 0);
  fs::create_symlink(dir_ + "/outside", root + "/bin/link");
  fs::create_directory_symlink(dir_, root + "/up");
  ASSERT_TRUE(DropPrivilegeBits(root).ok());
  auto mode = [](const std::string& p) {
    struct stat sb {};
    EXPECT_EQ(::lstat(p.c_str(), &sb), 0) << p;
    return sb.st_mode & 07777;
  };
  EXPECT_EQ(mode(root + "/bin/suid"), 0755u);
  EXPECT_EQ(mode(root + "/bin/sgid"), 0711u);
  EXPECT_EQ(mode(root + "/shared"), 0775u);
  EXPECT_EQ(mode(dir_ + "/outside"), 04755u);  // a link's target outside the root is not touched
}

using MountPoints = TempDir;

TEST_F(MountPoints, AreMadeInsideTheRoot) {
  ASSERT_TRUE(MakeMountPoints(dir_).ok());
  for (const char* d : {"proc", "dev", "tmp", "var/tmp", "home", "opt/ml", "opt/trainyard"})
    EXPECT_TRUE(fs::is_directory(dir_ + "/" + d)) << d;
  EXPECT_TRUE(fs::is_regular_file(dir_ + "/etc/hosts"));
  // The image's WorkingDir, made as Docker makes it; never above the root.
  ASSERT_TRUE(MakeMountPoints(dir_, "/srv/./app/").ok());
  EXPECT_TRUE(fs::is_directory(dir_ + "/srv/app"));
  EXPECT_EQ(MakeMountPoints(dir_, "/srv/../../escape").code(), Code::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(fs::path(dir_).parent_path() / "escape"));
}

TEST_F(MountPoints, ALinkOnTheWayIsRefusedAndNotFollowed) {
  const std::string outside = dir_ + "/outside";
  const std::string root = dir_ + "/root";
  fs::create_directories(outside);
  fs::create_directories(root);
  fs::create_directory_symlink(outside, root + "/opt");  // an absolute link out of the root
  Status st = MakeMountPoints(root);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("/opt"));
  EXPECT_TRUE(fs::is_empty(outside));
  fs::remove(root + "/opt");
  fs::create_directories(root + "/opt");
  fs::create_directories(root + "/etc");
  fs::create_symlink(outside + "/hosts", root + "/etc/hosts");
  EXPECT_EQ(MakeMountPoints(root).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(fs::is_empty(outside));
}

TEST(ImageConfig, ParsesTheOciConfigAndRefusesWrongTypes) {
  auto c = ParseImageConfig(R"({"architecture":"amd64","config":{"Entrypoint":["/e"],"Cmd":["a","b"],
      "Env":["PATH=/x","A=1"],"WorkingDir":"/w","User":"1000"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (ImageConfig{{"/e"}, {"a", "b"}, {"PATH=/x", "A=1"}, "/w", "1000"}));
  EXPECT_EQ(*ParseImageConfig(EncodeImageConfig(*c)), *c);
  EXPECT_TRUE(ParseImageConfig(R"({"config":{"Entrypoint":null}})").ok());
  EXPECT_FALSE(ParseImageConfig(R"({"config":{"Cmd":"train"}})").ok());
  EXPECT_FALSE(ParseImageConfig("[]").ok());
}

TEST(ImageCommand, SageMakerRunsTrainAndContainerEntrypointReplacesTheEntrypoint) {
  ImageConfig with_entry{{"/bin/entry", "--x"}, {"serve"}, {}, "", ""};
  ImageConfig bare{{}, {"serve"}, {}, "", ""};
  EXPECT_THAT(*ImageArgv(with_entry, ImageCommand::kTrain, {}), ElementsAre("/bin/entry", "--x", "train"));
  EXPECT_THAT(*ImageArgv(bare, ImageCommand::kTrain, {}), ElementsAre("train"));
  EXPECT_THAT(*ImageArgv(with_entry, ImageCommand::kTrain, {"python3", "t.py"}), ElementsAre("python3", "t.py"));
}

TEST(ImageCommand, BatchCommandReplacesCmdAndKeepsTheEntrypoint) {
  ImageConfig with_entry{{"/bin/entry"}, {"default"}, {}, "", ""};
  EXPECT_THAT(*ImageArgv(with_entry, ImageCommand::kCmd, {}), ElementsAre("/bin/entry", "default"));
  EXPECT_THAT(*ImageArgv(with_entry, ImageCommand::kCmd, {"a", "b"}), ElementsAre("/bin/entry", "a", "b"));
  ImageConfig cmd_only{{}, {"/bin/sh", "-c", "echo"}, {}, "", ""};
  EXPECT_THAT(*ImageArgv(cmd_only, ImageCommand::kCmd, {}), ElementsAre("/bin/sh", "-c", "echo"));
  EXPECT_THAT(*ImageArgv(cmd_only, ImageCommand::kCmd, {"true"}), ElementsAre("true"));
  auto nothing = ImageArgv(ImageConfig{}, ImageCommand::kCmd, {});
  ASSERT_FALSE(nothing.ok());
  EXPECT_THAT(nothing.status().message(), HasSubstr("neither an Entrypoint nor a Cmd"));
}

TEST(ImageCommand, EnvironmentAndWorkingDirectory) {
  ImageConfig c{{}, {}, {"A=1", "B=x=y", "A=2", "=bad", "novalue"}, "/srv", ""};
  auto env = ImageEnvironment(c);
  EXPECT_EQ(env["A"], "2");
  EXPECT_EQ(env["B"], "x=y");
  EXPECT_FALSE(env.count("novalue"));
  EXPECT_THAT(env["PATH"], HasSubstr("/usr/bin"));  // a default when the image sets none
  EXPECT_EQ(ImageWorkingDir(c), "/srv");
  EXPECT_EQ(ImageWorkingDir(ImageConfig{}), "/");
}

TEST(ImageSpec, TheImageAndItsCommandRoundTrip) {
  AttemptSpec spec;
  spec.attempt_id = "a";
  spec.instance_type = "ml.m5.large";
  UseContainerImage(&spec, "oci:/srv/x:v1", {"echo", "hi"});
  EXPECT_EQ(spec.image_command, ImageCommand::kCmd);
  auto back = DecodeAttemptSpec(Encode(spec));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, spec);
  spec.image_command = ImageCommand::kTrain;
  EXPECT_EQ(*DecodeAttemptSpec(Encode(spec)), spec);
  auto bad = DecodeAttemptSpec(R"({"attempt_id":"a","instance_type":"t","image":"x","image_command":"run"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("image_command"));
}

}  // namespace
}  // namespace ty::exec::image
