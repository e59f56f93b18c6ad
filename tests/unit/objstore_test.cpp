// The S3 client against a real moto_server (started on a free port for this test binary), and
// the directory store and router beside it.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "objstore/objstore.h"

namespace ty::objstore {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

size_t Discard(char*, size_t s, size_t n, void*) { return s * n; }

// Moto checks signatures once its first requests are spent (INITIAL_NO_AUTH_ACTION_COUNT): one
// probe, then three IAM calls that make a user with a key. Every later request must be signed
// with that key, so these tests also prove the client's SigV4 signing.
constexpr int kUnsignedRequests = 4;
std::string g_key_id, g_secret;

// A signed request to moto (bucket creation is not part of the store's interface).
long Raw(const std::string& method, const std::string& url, bool sign = true) {
  CURL* h = curl_easy_init();
  std::string userpwd = g_key_id + ":" + g_secret;
  if (sign) {
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
    curl_easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
  }
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  struct curl_slist* headers = curl_slist_append(nullptr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (sign) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
  long code = 0;
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(h);
  curl_slist_free_all(headers);
  return code;
}

class Moto : public ::testing::Environment {
 public:
  void SetUp() override {
    port = FreePort();
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      std::string p = std::to_string(port);
      ::setenv("INITIAL_NO_AUTH_ACTION_COUNT", std::to_string(kUnsignedRequests).c_str(), 1);
      ::execlp("moto_server", "moto_server", "-H", "127.0.0.1", "-p", p.c_str(), nullptr);
      ::_exit(127);
    }
    endpoint = "http://127.0.0.1:" + std::to_string(port);
    long answered = 0;
    for (int i = 0; i < 300 && (answered = Raw("GET", endpoint + "/", false)) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_NE(answered, 0) << "moto_server did not answer on " << endpoint;
    // The three IAM calls (boto3 signs them; moto does not check them yet).
    std::string script =
        "import boto3\n"
        "iam = boto3.client('iam', endpoint_url='" + endpoint + "', region_name='us-east-1',"
        " aws_access_key_id='x', aws_secret_access_key='x')\n"
        "iam.create_user(UserName='u')\n"
        "iam.put_user_policy(UserName='u', PolicyName='all', PolicyDocument='{\"Version\": \"2012-10-17\","
        " \"Statement\": [{\"Effect\": \"Allow\", \"Action\": \"*\", \"Resource\": \"*\"}]}')\n"
        "k = iam.create_access_key(UserName='u')['AccessKey']\n"
        "print(k['AccessKeyId'], k['SecretAccessKey'])\n";
    std::string path = fs::temp_directory_path() / ("objstore_test_iam." + std::to_string(::getpid()) + ".py");
    std::ofstream(path) << script;
    FILE* f = ::popen(("python3 " + path).c_str(), "r");
    ASSERT_NE(f, nullptr);
    char key[256] = {0}, secret[256] = {0};
    int got = std::fscanf(f, "%255s %255s", key, secret);
    ::pclose(f);
    fs::remove(path);
    ASSERT_EQ(got, 2) << "cannot create an IAM key in moto";
    g_key_id = key;
    g_secret = secret;
  }
  void TearDown() override {
    if (pid > 0) {
      ::kill(-pid, SIGTERM);
      ::kill(pid, SIGTERM);
      int st;
      ::waitpid(pid, &st, 0);
    }
  }
  static inline int port = 0;
  static inline pid_t pid = -1;
  static inline std::string endpoint;
};

const auto* const kMoto = ::testing::AddGlobalTestEnvironment(new Moto);

class ObjStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("objstore_test." + std::to_string(::getpid()) + "." +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    cfg.endpoint = Moto::endpoint;
    cfg.region = "us-east-1";
    cfg.access_key_id = g_key_id;
    cfg.secret_access_key = g_secret;
    cfg.buckets = {"*"};
    bucket = "bkt-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (auto& c : bucket) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bucket = bucket.substr(0, 40);
    ASSERT_EQ(Raw("PUT", Moto::endpoint + "/" + bucket), 200);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string Write(const std::string& name, const std::string& content) {
    fs::path p = dir / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir;
  ObjectStoreConfig cfg;
  std::string bucket;
};

TEST_F(ObjStoreTest, PutHeadGetDelete) {
  auto s3 = NewS3Store(cfg);
  auto put0 = s3->Put(bucket, "a/b c.txt", Write("src", "hello world"));
  ASSERT_TRUE(put0.ok()) << put0.message();
  auto head = s3->Head(bucket, "a/b c.txt");
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->size, 11);
  EXPECT_EQ(head->etag, "5eb63bbbe01eeed093cb22bb8f5acdc3");  // MD5 of the content
  ASSERT_TRUE(s3->Get(bucket, "a/b c.txt", (dir / "out/x").string()).ok());
  EXPECT_EQ(Read((dir / "out/x").string()), "hello world");
  for (const auto& e : fs::directory_iterator(dir / "out")) EXPECT_EQ(e.path().filename(), "x");  // no temp left
  ASSERT_TRUE(s3->Delete(bucket, "a/b c.txt").ok());
  auto gone = s3->Head(bucket, "a/b c.txt");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
}

TEST_F(ObjStoreTest, ListPaginatesAndFiltersByPrefix) {
  auto s3 = NewS3Store(cfg);
  std::string f = Write("one", "x");
  // More than one page of 1000 keys, plus keys outside the prefix.
  for (int i = 0; i < 1005; ++i) {
    char key[64];
    std::snprintf(key, sizeof key, "data/part-%05d", i);
    ASSERT_TRUE(s3->Put(bucket, key, f).ok());
  }
  ASSERT_TRUE(s3->Put(bucket, "other/x", f).ok());
  ASSERT_TRUE(s3->Put(bucket, "datax", f).ok());
  auto list = s3->List(bucket, "data/");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 1005u);
  EXPECT_EQ(list->front().key, "data/part-00000");
  EXPECT_EQ(list->back().key, "data/part-01004");
  EXPECT_EQ(list->front().size, 1);
  EXPECT_FALSE(list->front().etag.empty());
  auto all = s3->List(bucket, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1007u);
}

TEST_F(ObjStoreTest, MultipartUploadAboveTheThreshold) {
  cfg.multipart_threshold_bytes = 6 * 1024 * 1024;
  cfg.multipart_part_bytes = 5 * 1024 * 1024;  // S3's smallest part (but the last)
  auto s3 = NewS3Store(cfg);
  std::string content(13 * 1024 * 1024 + 17, '\0');
  std::mt19937 rng(7);
  for (auto& c : content) c = static_cast<char>(rng());
  ASSERT_TRUE(s3->Put(bucket, "big.bin", Write("big", content)).ok());
  auto head = s3->Head(bucket, "big.bin");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->size, static_cast<int64_t>(content.size()));
  EXPECT_NE(head->etag.find("-3"), std::string::npos) << head->etag;  // three parts
  ASSERT_TRUE(s3->Get(bucket, "big.bin", (dir / "big.out").string()).ok());
  EXPECT_TRUE(Read((dir / "big.out").string()) == content);
}

TEST_F(ObjStoreTest, ErrorsNameTheBucketKeyAndCode) {
  auto s3 = NewS3Store(cfg);
  auto missing = s3->Get(bucket, "no/such", (dir / "x").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("s3://" + bucket + "/no/such"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("NoSuchKey"), std::string::npos) << missing.message();
  EXPECT_FALSE(fs::exists(dir / "x")) << "no partial file is left";
  auto nobucket = s3->List("no-such-bucket-here", "");
  ASSERT_FALSE(nobucket.ok());
  EXPECT_NE(nobucket.status().message().find("NoSuchBucket"), std::string::npos) << nobucket.status().message();
  EXPECT_NE(nobucket.status().message().find("no-such-bucket-here"), std::string::npos);
  auto put = s3->Put("no-such-bucket-here", "k", Write("f", "x"));
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.message().find("NoSuchBucket"), std::string::npos) << put.message();
  // Wrong credentials.
  ObjectStoreConfig bad = cfg;
  bad.secret_access_key = "wrong";
  auto badsig = NewS3Store(bad)->List(bucket, "");
  ASSERT_FALSE(badsig.ok());
  EXPECT_NE(badsig.status().message().find("SignatureDoesNotMatch"), std::string::npos) << badsig.status().message();
  bad.access_key_id = "AKIANOTAKEYATALL0000";
  auto badkey = NewS3Store(bad)->Get(bucket, "k", (dir / "y").string());
  ASSERT_FALSE(badkey.ok());
  EXPECT_NE(badkey.message().find("InvalidAccessKeyId"), std::string::npos) << badkey.message();
  EXPECT_FALSE(fs::exists(dir / "y"));
  // Nothing listening: a clear transport error naming the endpoint.
  cfg.endpoint = "http://127.0.0.1:1";
  auto down = NewS3Store(cfg)->Head(bucket, "k");
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), Code::kUnavailable);
  EXPECT_NE(down.status().message().find("127.0.0.1:1"), std::string::npos) << down.status().message();
}

TEST_F(ObjStoreTest, RouterSendsListedBucketsToTheEndpointAndOthersToTheDirectoryStore) {
  cfg.buckets = {bucket};
  auto router = NewRouter(cfg, (dir / "buckets").string());
  EXPECT_TRUE(router->Remote(bucket));
  EXPECT_FALSE(router->Remote("local-bucket"));
  std::string f = Write("f", "abc");
  ASSERT_TRUE(router->Put(bucket, "k/1", f).ok());
  ASSERT_TRUE(router->Put("local-bucket", "k/1", f).ok());
  EXPECT_TRUE(fs::exists(dir / "buckets/local-bucket/k/1"));
  EXPECT_FALSE(fs::exists(dir / "buckets" / bucket));
  ASSERT_TRUE(NewS3Store(cfg)->Head(bucket, "k/1").ok());
  auto local = router->List("local-bucket", "k/");
  ASSERT_TRUE(local.ok());
  ASSERT_EQ(local->size(), 1u);
  EXPECT_EQ(local->front().key, "k/1");
  ASSERT_TRUE(router->Delete("local-bucket", "k/1").ok());
  EXPECT_FALSE(fs::exists(dir / "buckets/local-bucket/k/1"));
  // No endpoint: everything is local.
  ObjectStoreConfig none;
  EXPECT_FALSE(NewRouter(none, (dir / "buckets").string())->Remote(bucket));
}

// Virtual-host style: https://bucket.host/key (*.localhost resolves to the loopback).
TEST_F(ObjStoreTest, VirtualHostStyle) {
  cfg.path_style = false;
  cfg.endpoint = "http://localhost:" + std::to_string(Moto::port);
  auto s3 = NewS3Store(cfg);
  auto put = s3->Put(bucket, "v/k.txt", Write("v", "virtual"));
  ASSERT_TRUE(put.ok()) << put.message();
  auto list = s3->List(bucket, "v/");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().key, "v/k.txt");
  auto get = s3->Get(bucket, "v/k.txt", (dir / "vout").string());
  ASSERT_TRUE(get.ok()) << get.message();
  EXPECT_EQ(Read((dir / "vout").string()), "virtual");
  cfg.path_style = true;
  cfg.endpoint = Moto::endpoint;
  EXPECT_TRUE(NewS3Store(cfg)->Head(bucket, "v/k.txt").ok());  // the same object, path style
}

// ------------------------------------------------------------------------------------------
// The directory store: keys resolve beneath their bucket, without following symlinks, whether
// the kernel offers openat2 or the store walks the path one O_NOFOLLOW open at a time.

class DirStoreTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    DisableOpenat2ForTesting(!GetParam());
    dir = fs::temp_directory_path() / ("dirstore_test." + std::to_string(::getpid()) + "." +
                                       std::to_string(GetParam()));
    fs::remove_all(dir);
    root = dir / "buckets";
    outside = dir / "outside";
    fs::create_directories(root / "bkt");
    fs::create_directories(outside);
    std::ofstream(outside / "secret") << "s3cr3t";
    std::ofstream(dir / "src") << "new content";
    store = NewDirStore(root.string());
  }
  void TearDown() override {
    DisableOpenat2ForTesting(false);
    fs::remove_all(dir);
  }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir, root, outside;
  std::unique_ptr<ObjectStore> store;
};

INSTANTIATE_TEST_SUITE_P(Resolution, DirStoreTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Openat2" : "NoFollowWalk"; });

TEST_P(DirStoreTest, PutHeadGetListDelete) {
  ASSERT_TRUE(store->Put("bkt", "data/a/x.csv", (dir / "src").string()).ok());
  ASSERT_TRUE(store->Put("bkt", "datax", (dir / "src").string()).ok());
  auto head = store->Head("bkt", "data/a/x.csv");
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->size, 11);
  ASSERT_TRUE(store->Get("bkt", "data/a/x.csv", (dir / "got/x").string()).ok());
  EXPECT_EQ(Read(dir / "got/x"), "new content");
  auto list = store->List("bkt", "data/");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().key, "data/a/x.csv");
  auto all = store->List("bkt", "dat");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  ASSERT_TRUE(store->Delete("bkt", "data/a/x.csv").ok());
  EXPECT_EQ(store->Head("bkt", "data/a/x.csv").status().code(), Code::kNotFound);
  EXPECT_TRUE(store->Delete("bkt", "no/such/key").ok());  // as S3: deleting nothing succeeds
  EXPECT_EQ(store->List("no-such-bucket", "").status().code(), Code::kNotFound);
}

// A warm pool reuses an unpacked source archive while the archive's ETag and size stay the same,
// so a rewritten object of the same size must get a new tag, and one left alone must keep it.
TEST_P(DirStoreTest, ARewrittenObjectOfTheSameSizeGetsANewEtag) {
  ASSERT_TRUE(store->Put("bkt", "code/src.tar.gz", (dir / "src").string()).ok());
  auto first = store->Head("bkt", "code/src.tar.gz");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->etag.empty());
  EXPECT_EQ(store->Head("bkt", "code/src.tar.gz")->etag, first->etag);
  auto listed = store->List("bkt", "code/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().etag, first->etag);
  std::ofstream(dir / "src2") << "NEW CONTENT";  // the same 11 bytes
  ASSERT_TRUE(store->Put("bkt", "code/src.tar.gz", (dir / "src2").string()).ok());
  auto second = store->Head("bkt", "code/src.tar.gz");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->size, first->size);
  EXPECT_NE(second->etag, first->etag);
}

TEST_P(DirStoreTest, KeysThatAreNotSafeRelativePathsAreRefused) {
  const std::string abs = (outside / "abs").string();  // "/tmp/.../outside/abs"
  const std::vector<std::string> keys = {abs,  "/" + abs, "../outside/x", "a/../../../outside/x", "a//b", "./a", "a/.",
                                         "a\001b", std::string("a\0b", 3), "", "a/"};
  for (const std::string& key : keys) {
    SCOPED_TRACE(key);
    Status put = store->Put("bkt", key, (dir / "src").string());
    EXPECT_EQ(put.code(), Code::kInvalidArgument) << put.message();
    EXPECT_EQ(store->Get("bkt", key, (dir / "got").string()).code(), Code::kInvalidArgument);
    EXPECT_EQ(store->Head("bkt", key).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(store->Delete("bkt", key).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(store->Put("../buckets", "x", (dir / "src").string()).code(), Code::kInvalidArgument);
  EXPECT_EQ(store->List("bkt", "../").status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(outside / "abs"));
  EXPECT_FALSE(fs::exists(outside / "x"));
  EXPECT_FALSE(fs::exists(dir / "got"));
  EXPECT_EQ(Read(outside / "secret"), "s3cr3t");
}

TEST_P(DirStoreTest, ASymlinkPlantedInABucketIsNeverFollowed) {
  fs::create_directory_symlink(outside, root / "bkt/dirlink");     // a folder of the key
  fs::create_symlink(outside / "secret", root / "bkt/filelink");   // the key itself
  fs::create_directories(root / "bkt/deep");
  fs::create_directory_symlink(outside, root / "bkt/deep/link");  // a folder further down

  for (const char* key : {"dirlink/secret", "filelink", "deep/link/secret"}) {
    SCOPED_TRACE(key);
    Status get = store->Get("bkt", key, (dir / "got").string());
    EXPECT_FALSE(get.ok());
    EXPECT_EQ(get.code(), Code::kNotFound) << get.message();
    EXPECT_FALSE(fs::exists(dir / "got"));
    EXPECT_EQ(store->Head("bkt", key).status().code(), Code::kNotFound);
  }
  // Writing through a symlinked folder is refused and creates nothing outside.
  for (const char* key : {"dirlink/new", "deep/link/new", "deep/link/sub/new"}) {
    SCOPED_TRACE(key);
    Status put = store->Put("bkt", key, (dir / "src").string());
    EXPECT_FALSE(put.ok());
    EXPECT_NE(put.message().find("symlink"), std::string::npos) << put.message();
  }
  EXPECT_FALSE(fs::exists(outside / "new"));
  EXPECT_FALSE(fs::exists(outside / "sub"));
  // Deleting through one removes nothing outside.
  (void)store->Delete("bkt", "dirlink/secret");  // refused or a no-op: either way, nothing outside changes
  EXPECT_EQ(Read(outside / "secret"), "s3cr3t");
  // Symlinks are not objects: the listing holds none, and nothing behind them.
  auto list = store->List("bkt", "");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty()) << list->front().key;
  // Writing the symlink's own key replaces the link with the object; its target is untouched.
  ASSERT_TRUE(store->Put("bkt", "filelink", (dir / "src").string()).ok());
  EXPECT_FALSE(fs::is_symlink(root / "bkt/filelink"));
  EXPECT_EQ(Read(root / "bkt/filelink"), "new content");
  EXPECT_EQ(Read(outside / "secret"), "s3cr3t");
}

TEST_P(DirStoreTest, AFifoInABucketIsNotAnObjectAndDoesNotBlockTheReader) {
  ASSERT_EQ(::mkfifo((root / "bkt/fifo").c_str(), 0644), 0);
  EXPECT_EQ(store->Get("bkt", "fifo", (dir / "got").string()).code(), Code::kNotFound);
  EXPECT_EQ(store->Head("bkt", "fifo").status().code(), Code::kNotFound);
  auto list = store->List("bkt", "");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST(ParseS3UriTest, SplitsBucketAndKey) {
  std::string b, k;
  ASSERT_TRUE(ParseS3Uri("s3://bkt/a/b/", &b, &k));
  EXPECT_EQ(b, "bkt");
  EXPECT_EQ(k, "a/b/");
  ASSERT_TRUE(ParseS3Uri("s3://bkt", &b, &k));
  EXPECT_EQ(k, "");
  EXPECT_FALSE(ParseS3Uri("https://bkt/a", &b, &k));
  EXPECT_FALSE(ParseS3Uri("s3://bkt//etc/passwd", &b, &k));
  EXPECT_FALSE(ParseS3Uri("s3://bkt/../../", &b, &k));
  EXPECT_FALSE(ParseS3Uri("s3://../x", &b, &k));
}

}  // namespace
}  // namespace ty::objstore
