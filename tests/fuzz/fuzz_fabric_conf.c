/*
 * libFuzzer harness of the fabric.conf parser: the input goes to an
 * in-memory file that fabric_conf_load() reads by its /proc/self/fd name;
 * the properties are those of the unit test fuzz_fabric_conf
 * (tests/fuzz/fuzz_check.h). Build and run: docs/fuzzing.md.
 */
#define FUZZ_SEED fuzz_fabric_seed
#define FUZZ_CHECK fuzz_check_fabric_conf
#define FUZZ_CORPUS "fabric"
#define FUZZ_SCRATCH "fabric.conf"
#include "fuzz_text_file.h"
