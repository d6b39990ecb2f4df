/** @file test_log.cpp @brief step() and its step_times test hook (what ./lab trace --json reads). */
#include <rdma_samples/log.hpp>
#include <rdma_samples/test_control.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace rdma_samples;

TEST(Log, StepTimesAppendsEachStepAfterTheTimeItWasAnnounced)
{
    const std::string path = testing::TempDir() + "step-times-" + std::to_string(getpid());
    std::remove(path.c_str());
    ::setenv(test_control_name(TestHook::step_times), path.c_str(), 1);
    const auto before = std::chrono::system_clock::now();
    step(3, "post a WRITE of %d bytes", 25);
    step(4, "%s", "wait");
    ::unsetenv(test_control_name(TestHook::step_times));
    step(5, "not timed: the hook is unset");

    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::remove(path.c_str());
    const std::regex line(R"((\d+)\.(\d{9}) (step \d+: [^\n]*)\n)");
    std::string rest = text.str();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(rest, m, line)) << rest;
    EXPECT_EQ(m.position(0), 0);
    EXPECT_EQ(m[3], "step 3: post a WRITE of 25 bytes");
    const auto seconds = std::stoll(m[1]);
    const auto then = std::chrono::duration_cast<std::chrono::seconds>(before.time_since_epoch()).count();
    EXPECT_GE(seconds, then); // CLOCK_REALTIME, the clock tcpdump stamps frames with
    EXPECT_LE(seconds, then + 60);
    rest = m.suffix();
    ASSERT_TRUE(std::regex_search(rest, m, line)) << rest;
    EXPECT_EQ(m[3], "step 4: wait");
    EXPECT_EQ(std::string(m.suffix()), "");
}

TEST(Log, StepTimesThatCannotBeWrittenLeaveTheLessonAlone)
{
    ::setenv(test_control_name(TestHook::step_times), "/nonexistent-dir/steps", 1);
    step(1, "still announced");
    ::unsetenv(test_control_name(TestHook::step_times));
    EXPECT_EQ(current_step(), 1);
}
