/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The interface this library speaks, as data: `coscheml preflight` reads it
 * from the ELF file without loading the library (coscheml_abi_version() is
 * what the shim calls).
 */
#include "coscheml_abi.h"

const uint32_t coscheml_library_abi = COSCHEML_ABI_VERSION;
