#pragma once
/// \file
/// Everything clump offers to C++ programs.

#include <clump/am.hpp>
#include <clump/async.hpp>
#include <clump/gas.hpp>
#include <clump/rpc.hpp>
#include <clump/runtime.hpp>
#include <clump/status.hpp>
