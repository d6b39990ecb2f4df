/** @file test_hints.cpp @brief The hint table and the errors built from it. */
#include <sys/resource.h>

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/rc_qp.hpp>
#include <rdma_samples/text.hpp>
#include <rdma_samples/wait.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

using namespace rdma_samples;

TEST(Hints, EveryCompletionStatusASampleCanMeetHasItsOwnHint)
{
    const std::pair<ibv_wc_status, const char *> expected[] = {
        {IBV_WC_REM_ACCESS_ERR, "rkey"},
        {IBV_WC_RETRY_EXC_ERR, "gone or not ready"},
        {IBV_WC_RNR_RETRY_EXC_ERR, "receive"},
        {IBV_WC_WR_FLUSH_ERR, "earlier completion"},
        {IBV_WC_LOC_LEN_ERR, "longer than the receive buffer"},
        {IBV_WC_REM_INV_REQ_ERR, "QP access flags"},
        {IBV_WC_LOC_PROT_ERR, "lkey"},
        {IBV_WC_REM_OP_ERR, "peer"},
    };
    for (const auto &[status, word] : expected) {
        EXPECT_NE(hint_for_wc_status(status).find(word), std::string::npos) << wc_status_name(status);
        EXPECT_STRNE(wc_status_name(status), "IBV_WC_(unknown)");
    }
    for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s)
        EXPECT_FALSE(hint_for_wc_status(static_cast<ibv_wc_status>(s)).empty()) << s;
}

TEST(Hints, ErrnoTableMatchesCallAndErrno)
{
    EXPECT_NE(hint_for_errno("ibv_reg_mr", ENOMEM).find("ulimit -l"), std::string::npos);
    EXPECT_NE(hint_for_errno("ibv_modify_qp(RTR)", ENETUNREACH).find("-g"), std::string::npos);
    EXPECT_NE(hint_for_errno("ibv_open_device(rxe0)", EACCES).find("root"), std::string::npos);
    EXPECT_NE(hint_for_errno("ibv_modify_qp(RTS)", EINVAL).find("state"), std::string::npos);
    EXPECT_NE(hint_for_errno("ibv_create_ah(::ffff:10.77.0.99)", ETIMEDOUT).find("ARP"), std::string::npos);
    EXPECT_NE(hint_for_errno("ibv_frobnicate", EBADF).find("man page of ibv_frobnicate"), std::string::npos);
}

TEST(Hints, RegistrationOutOfMemoryNamesTheLockedMemoryLimit)
{
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &saved), 0);
    rlimit low = saved;
    low.rlim_cur = 64 * 1024; // lowering the soft limit needs no privilege
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < low.rlim_cur)
        low.rlim_cur = saved.rlim_max;
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
    const std::string hint = hint_for_errno("ibv_reg_mr(descriptor send)", ENOMEM);
    const std::string other = hint_for_errno("ibv_create_qp", ENOMEM);
    const std::string none = hint_for_errno("ibv_reg_mr", EPERM); // a limit of 0: refused before counting
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &saved), 0);
    EXPECT_NE(hint.find("RLIMIT_MEMLOCK here: " + std::to_string(low.rlim_cur / 1024) + " KiB"), std::string::npos)
        << hint;
    EXPECT_EQ(other.find("RLIMIT_MEMLOCK"), std::string::npos) << other; // only a registration pins memory
    EXPECT_NE(none.find("may lock no memory at all"), std::string::npos) << none;
    EXPECT_NE(none.find("RLIMIT_MEMLOCK here:"), std::string::npos) << none;
}

TEST(Check, ErrorsCarryCallErrnoAndHint)
{
    try {
        check_rc(ENOMEM, "ibv_reg_mr");
        FAIL();
    } catch (const Error &e) {
        EXPECT_STREQ(e.what(), "ibv_reg_mr: Cannot allocate memory (errno 12)");
        EXPECT_NE(e.hint().find("ulimit -l"), std::string::npos);
    }
    errno = EACCES;
    EXPECT_THROW(check(static_cast<int *>(nullptr), "ibv_alloc_pd"), Error);
    errno = EINVAL;
    EXPECT_THROW(check_rc(-1, "ibv_modify_qp(INIT)"), Error);
    EXPECT_NO_THROW(check_rc(0, "ok"));
    EXPECT_THROW(check_poll(-1), Error);
    EXPECT_EQ(check_poll(1), 1);
}

TEST(Check, APostsErrnoIsReadWhetherPositiveOrNegatedAndAnotherCallsNegativeMeansErrno)
{
    // ibv_post_send() returns the errno; libsiw returns it negated. Neither sets errno.
    for (const int rc : {EINVAL, -EINVAL}) {
        errno = 0;
        try {
            check_post(rc, "ibv_post_send(RDMA WRITE)");
            FAIL() << rc;
        } catch (const Error &e) {
            EXPECT_STREQ(e.what(), "ibv_post_send(RDMA WRITE): Invalid argument (errno 22)") << rc;
        }
    }
    EXPECT_NO_THROW(check_post(0, "ibv_post_recv"));
    // librdmacm's -1 and ibv_rereg_mr()'s own negative codes (IBV_REREG_MR_ERR_CMD is -4) set errno:
    // that is the cause, not the code.
    for (const int rc : {-1, -4}) {
        errno = EOPNOTSUPP;
        try {
            check_rc(rc, "ibv_rereg_mr");
            FAIL() << rc;
        } catch (const Error &e) {
            EXPECT_STREQ(e.what(), "ibv_rereg_mr: Operation not supported (errno 95)") << rc;
        }
    }
}

TEST(Check, FailedCompletionNamesStatusAndHint)
{
    ibv_wc wc{};
    wc.status = IBV_WC_REM_ACCESS_ERR;
    wc.vendor_err = 0x88;
    try {
        check_wc(wc, IBV_WC_RDMA_WRITE, "the RDMA WRITE");
        FAIL();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("the RDMA WRITE completed with IBV_WC_REM_ACCESS_ERR"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("vendor_err 0x88"), std::string::npos);
        EXPECT_NE(e.hint().find("rkey"), std::string::npos);
    }
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RECV;
    EXPECT_THROW(check_wc(wc, IBV_WC_RDMA_WRITE, "x"), Error);
    EXPECT_NO_THROW(check_wc(wc, IBV_WC_RECV, "x"));
}

TEST(Waiter, GivesUpAfterTheTimeout)
{
    const auto t0 = std::chrono::steady_clock::now();
    Waiter w(1, "nothing", "check nothing");
    try {
        for (;;)
            w.pause();
    } catch (const Error &e) {
        EXPECT_STREQ(e.what(), "timed out after 1 s waiting for nothing");
        EXPECT_EQ(e.hint(), "check nothing");
    }
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, std::chrono::seconds(1));
    EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(Deadline, ExpiresAfterItsBoundAndRestarts)
{
    Deadline d = Deadline::in_ms(50);
    EXPECT_FALSE(d.expired());
    EXPECT_GT(d.left_ms(), 0);
    EXPECT_LE(d.left_ms(), 50);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_TRUE(d.expired());
    EXPECT_EQ(d.left_ms(), 0);
    d.restart();
    EXPECT_FALSE(d.expired());
    EXPECT_EQ(Deadline(7).timeout_s(), 7);
}

// A poll() given left_ms() must not wake before the deadline: in its last millisecond left_ms() is 1, not
// 0 (rounded down, the file transfer once reported a -t timeout where --deadline had run out).
TEST(Deadline, LeftIsZeroOnlyOnceExpired)
{
    const Deadline d = Deadline::in_ms(3);
    while (!d.expired()) {
        if (d.left_ms() == 0) { // (read after left_ms(): the clock only moves on)
            EXPECT_TRUE(d.expired());
        }
    }
    EXPECT_EQ(d.left_ms(), 0);
}

TEST(Deadline, TimeoutErrorSaysHowLongAndWhat)
{
    const Error e = timeout_error(5, "the peer's file");
    EXPECT_STREQ(e.what(), "timed out after 5 s waiting for the peer's file");
    EXPECT_FALSE(e.hint().empty());
    EXPECT_EQ(timeout_error(5, "x", "do this").hint(), "do this");
}

TEST(Number, OneParserForFlagsAndDescriptors)
{
    EXPECT_EQ(parse_unsigned("42", NumberBase::decimal), 42u);
    EXPECT_EQ(parse_unsigned("0x2a", NumberBase::hex), 42u);
    EXPECT_EQ(parse_unsigned("0x2A", NumberBase::either), 42u);
    EXPECT_EQ(parse_unsigned("0X2a", NumberBase::either), 42u);
    EXPECT_EQ(parse_unsigned("18446744073709551615", NumberBase::decimal), UINT64_MAX);
    EXPECT_EQ(parse_unsigned("0xffffffffffffffff", NumberBase::hex), UINT64_MAX);
    // A descriptor's hex is "0x" and lowercase digits; its decimals are digits only.
    EXPECT_FALSE(parse_unsigned("0x2A", NumberBase::hex));
    EXPECT_FALSE(parse_unsigned("0X2a", NumberBase::hex));
    EXPECT_FALSE(parse_unsigned("2a", NumberBase::hex));
    EXPECT_FALSE(parse_unsigned("0x2a", NumberBase::decimal));
    for (const char *bad : {"", "0x", "-1", "+1", " 1", "1 ", "1.0", "18446744073709551616", "0x10000000000000000"})
        EXPECT_FALSE(parse_unsigned(bad, NumberBase::either)) << bad;
    EXPECT_FALSE(parse_unsigned(std::string("1\0"
                                            "2",
                                            3),
                                NumberBase::decimal));
    EXPECT_EQ(parse_unsigned("4096", NumberBase::decimal, 4096), 4096u);
    EXPECT_FALSE(parse_unsigned("4097", NumberBase::decimal, 4096));
}

// A client tries again while nobody listens: RoCE's REJ reason 8 and iWARP's refused TCP connect say
// so; a request dropped by a listener (-ECONNRESET) or a server's own refusal do not.
TEST(CmNobodyListens, RoceRejectReasonAndIwarpRefusedConnect)
{
    rdma_cm_event ev{};
    ev.event = RDMA_CM_EVENT_REJECTED;
    ev.status = 8; // IBTA CM reason 8, "Invalid Service ID"
    EXPECT_TRUE(cm_nobody_listens(ev));
    ev.status = -ECONNREFUSED; // iWARP: the SYN answered with a RST
    EXPECT_TRUE(cm_nobody_listens(ev));
    ev.status = -ECONNRESET; // iWARP: the listener took the connection and dropped the request
    EXPECT_FALSE(cm_nobody_listens(ev));
    ev.status = 28; // a server's rdma_reject(): IBTA reason 28, consumer defined
    EXPECT_FALSE(cm_nobody_listens(ev));
    ev.event = RDMA_CM_EVENT_UNREACHABLE;
    ev.status = 8;
    EXPECT_FALSE(cm_nobody_listens(ev));
}
