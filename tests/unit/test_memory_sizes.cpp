/**
 * @file test_memory_sizes.cpp
 * @brief rdma_memory_register's --sizes, without a device: parse_sizes() (rdma_memory/support/table.hpp)
 * reads the list, each size at most 64G and 1 to 32 of them; Options::checked_sizes()
 * (rdma_memory/support/options.hpp) then refuses a size of 0 and one that is not a whole number of pages.
 */
#include "rdma_memory/support/options.hpp"
#include "rdma_memory/support/table.hpp"

#include <rdma_samples/args.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <vector>

using rdma_memory::GiB;
using rdma_memory::KiB;
using rdma_memory::MiB;
using rdma_memory::parse_sizes;

namespace {

/** What parse_sizes() threw for @p list, or "(nothing thrown)". */
std::string sizes_error(const std::string &list)
{
    try {
        parse_sizes(list);
    } catch (const rdma_samples::UsageError &e) {
        return e.what();
    }
    return "(nothing thrown)";
}

/** The error for a list with a size parse_sizes() cannot read, @p quoted as the message shows it. */
std::string bad_size(const std::string &quoted)
{
    return "--sizes: expected sizes such as 4K,64K,1M (at most 64G each), got " + quoted;
}

/** What checked_sizes() threw for @p sizes: what() and hint(), or "(nothing thrown)". */
std::pair<std::string, std::string> checked_error(std::vector<std::size_t> sizes, bool huge = false)
{
    rdma_memory::Options opt;
    opt.sizes = std::move(sizes);
    opt.huge = huge;
    try {
        opt.checked_sizes();
    } catch (const rdma_samples::UsageError &e) {
        return {e.what(), e.hint()};
    }
    return {"(nothing thrown)", ""};
}

} // namespace

TEST(MemorySizes, NumbersWithKMOrGOfEitherCaseAreRead)
{
    EXPECT_EQ(parse_sizes("4K,64K,1M"), (std::vector<std::size_t>{4 * KiB, 64 * KiB, MiB}));
    EXPECT_EQ(parse_sizes("4k,2m,1g"), (std::vector<std::size_t>{4 * KiB, 2 * MiB, GiB}));
    EXPECT_EQ(parse_sizes("1"), (std::vector<std::size_t>{1}));
    EXPECT_EQ(parse_sizes("5000,4096"), (std::vector<std::size_t>{5000, 4096})); // bytes, in the order given
}

TEST(MemorySizes, EachSizeMayBe64GInAnyUnit)
{
    for (const char *list : {"64G", "65536M", "67108864K", "68719476736"})
        EXPECT_EQ(parse_sizes(list), (std::vector<std::size_t>{64 * GiB})) << list;
}

TEST(MemorySizes, OneUnitPast64GIsRejected)
{
    for (const char *list : {"65G", "65537M", "67108865K", "68719476737", "4K,65G"})
        EXPECT_EQ(sizes_error(list), bad_size('"' + std::string(list) + '"'));
}

TEST(MemorySizes, HugeValuesAreRejectedNotWrapped)
{
    // Each would wrap around 2^64 once multiplied by its unit (or is past it already).
    for (const char *list : {"18446744073709551615", "18446744073709551616", "18446744073709551615K", "17179869184G",
                             "99999999999999999999999999M"})
        EXPECT_EQ(sizes_error(list), bad_size('"' + std::string(list) + '"'));
}

TEST(MemorySizes, AnythingButDigitsAndOneUnitIsRejected)
{
    for (const char *list : {"4X", "4KB", "4KK", "4 K", " 4K", "4K ", "-4K", "+4K", "0x10", "4.5M", "K", "1e6", "4T"})
        EXPECT_EQ(sizes_error(list), bad_size('"' + std::string(list) + '"'));
}

TEST(MemorySizes, AnEmptyItemIsRejected)
{
    for (const char *list : {",4K", "4K,,8K", ","})
        EXPECT_EQ(sizes_error(list), bad_size('"' + std::string(list) + '"'));
}

TEST(MemorySizes, OneTo32SizesAreAccepted)
{
    std::string list = "4K";
    for (int i = 1; i < 32; ++i)
        list += ",4K";
    EXPECT_EQ(parse_sizes(list).size(), 32U);
    EXPECT_EQ(sizes_error(""), "--sizes: expected 1 to 32 sizes, got \"\"");
    std::string thirty_three = list + ",4K";
    std::string first_sixty;
    for (int i = 0; i < 20; ++i)
        first_sixty += "4K,";
    EXPECT_EQ(sizes_error(thirty_three), "--sizes: expected 1 to 32 sizes, got \"" + first_sixty + "...\" (98 bytes)");
}

TEST(MemorySizes, ControlBytesInTheListAreQuoted)
{
    const std::string error = sizes_error("4K,\x1b[2J");
    EXPECT_EQ(error, bad_size(R"("4K,\x1b[2J")"));
    EXPECT_EQ(error.find('\x1b'), std::string::npos);
    EXPECT_EQ(sizes_error("4K\n"), bad_size(R"("4K\n")"));
    EXPECT_EQ(sizes_error("\xff"), bad_size(R"("\xff")"));
    EXPECT_EQ(sizes_error(std::string("4\0", 2)), bad_size(R"("4\x00")")); // a NUL is no unit (strchr took it for G)
}

TEST(MemorySizes, ZeroIsReadThenRefusedByCheckedSizes)
{
    EXPECT_EQ(parse_sizes("0"), (std::vector<std::size_t>{0}));
    EXPECT_EQ(parse_sizes("0K"), (std::vector<std::size_t>{0}));
    const auto [what, hint] = checked_error({4 * KiB, 0});
    EXPECT_EQ(what, "--sizes: a size of 0 registers nothing");
    EXPECT_EQ(hint, "e.g. 4K,64K,1M");
}

TEST(MemorySizes, APartOfAPageIsRefusedByCheckedSizes)
{
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    EXPECT_EQ(checked_error({page, 16 * page}).first, "(nothing thrown)");
    const auto [what, hint] = checked_error({page + 1});
    EXPECT_EQ(what, "--sizes: " + std::to_string(page + 1) + " bytes is not a whole number of " +
                        rdma_memory::size_text(page) + " pages");
    EXPECT_EQ(hint, "e.g. 4K,64K,1M");
    // With --huge, a page is 2 MiB.
    EXPECT_EQ(checked_error({2 * MiB, 64 * GiB}, true).first, "(nothing thrown)");
    const auto [huge_what, huge_hint] = checked_error({4 * KiB}, true);
    EXPECT_EQ(huge_what, "--sizes: 4096 bytes is not a whole number of 2 MiB pages");
    EXPECT_EQ(huge_hint, "with --huge every size is a multiple of 2M");
}
