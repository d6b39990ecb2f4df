/**
 * @file replay.cpp
 * @brief Runs a fuzz target on files, without libFuzzer: the seed corpus and every input a fuzzer ever
 * found are replayed this way by the unit suite of every build (the sanitizer build included).
 *
 * Usage: fuzz_TARGET_replay FILE_OR_DIR...   (prints one TAP line, "ok 1 - N inputs replayed"; a finding
 * aborts)
 */
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size);

int main(int argc, char **argv)
{
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    for (int i = 1; i < argc; ++i) {
        if (!fs::exists(argv[i])) // a target with no findings yet has no regressions folder
            continue;
        if (fs::is_directory(argv[i])) {
            for (const auto &e : fs::recursive_directory_iterator(argv[i]))
                if (e.is_regular_file())
                    files.push_back(e.path());
        } else {
            files.emplace_back(argv[i]);
        }
    }
    if (files.empty()) {
        std::fprintf(stderr, "replay: no inputs (give files or folders of the corpus)\n");
        return 2;
    }
    for (const auto &f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
            return 2;
        }
        const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t *>(data.data()), data.size());
    }
    std::printf("1..1\nok 1 - %zu inputs replayed\n", files.size());
    return 0;
}
