#include "host/profile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"

namespace dsh::host {
namespace {

TEST(Profile, CreatesTheHomeAndATokenOnce) {
  dsh::testing::TempDir dir;
  auto p = Profile::Open(dir.File("home"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto t1 = p->LoadOrCreateToken();
  auto t2 = p->LoadOrCreateToken();
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(*t1, *t2);
  EXPECT_EQ(t1->size(), 32u);
  struct stat st {};
  ASSERT_EQ(stat(p->token_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(Profile, FindsARunningHostAndForgetsDeadOnes) {
  dsh::testing::TempDir dir;
  auto p = Profile::Open(dir.File("home"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->FindRunningHost().status().code(), "unavailable");
  ASSERT_TRUE(p->WriteRunFile({"http://127.0.0.1:1/", "dead", 999999999}).ok());
  EXPECT_EQ(p->FindRunningHost().status().code(), "unavailable");
  ASSERT_TRUE(p->WriteRunFile({"http://127.0.0.1:2/", "tok", getpid()}).ok());
  auto h = p->FindRunningHost();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->url, "http://127.0.0.1:2/");
  EXPECT_EQ(h->token, "tok");
  p->RemoveRunFile(getpid());
  EXPECT_FALSE(p->FindRunningHost().ok());
}

}  // namespace
}  // namespace dsh::host
