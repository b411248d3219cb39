# SPDX-License-Identifier: BSD-3-Clause
# GenBadInputMatrix.cmake — generate the bad-input matrix's cases from the public headers.
#
# Usage: cmake -DSOURCE_DIR=<repo> -DOUTPUT=<file.inc> -P GenBadInputMatrix.cmake
#
# Every function declared RECAP_API in include/recap.h and include/recap/*.h is read with its
# parameters. For each pointer parameter (a '*' in its type, or a typedef of a pointer: handles,
# streams, callbacks) one case passes NULL with every other argument valid; for each parameter
# that is a recap handle (typedef struct recap_x *recap_x_t) two more cases pass a destroyed
# handle and a foreign one (an object on the stack cast to the handle type). The output is C:
# one thunk per case and a table tests/reliability/test_bad_input.c runs, each case in its own process.
#
# A NULL is expected to give RECAP_ERROR_INVALID_ARGUMENT unless the allow-list below says what
# the headers document instead. The build fails, naming the function, when a parameter's type has
# no valid value in the table below (so a new function cannot slip through untested), when a
# function that returns no status takes a pointer that is not allow-listed (it could not report
# the NULL), or when an allow-list entry names a parameter that no longer exists.

cmake_minimum_required(VERSION 3.24)

if(NOT SOURCE_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repo> -DOUTPUT=<file> -P GenBadInputMatrix.cmake")
endif()

# ---- the reviewed allow-list -------------------------------------------------------------------
# "function.parameter|expectation|why". Expectations: a status name without RECAP_ (the case runs
# and must return it), VOID (a function without a status: the case runs and must not crash), or
# SKIP (no NULL case: NULL is an ordinary value of the type). "type:<type>" entries apply to every
# parameter of that type. Every entry says where the behaviour is documented.
set(ALLOW
  "type:recap_stream_t|SKIP|recap.h: NULL is the legacy default stream, a valid stream"
  "recap_free.ptr|SUCCESS|alloc.h: recap_free(NULL) is a no-op"
  "recap_string_free.s|VOID|free(NULL) semantics: recap_string_free releases what recap allocated, NULL included"
  "recap_graph_destroy.graph|SUCCESS|graph.h: destroying NULL is a no-op"
  "recap_generator_destroy.generator|SUCCESS|rng.h: destroying NULL is a no-op"
  "recap_graphed_destroy.handle|SUCCESS|graphed.h: destroying NULL is a no-op"
  "recap_graph_info_free.info|VOID|inspect.h: frees what recap_graph_inspect made, and NULL is a no-op like free(NULL)"
  "recap_log_set.fn|VOID|recap.h: a NULL callback restores the stderr logger"
  "recap_log_set.user_data|VOID|recap.h: user data is opaque, handed back to the callback"
  "recap_graph_capture_begin.options|SUCCESS|graph.h: options NULL means RECAP_CAPTURE_OPTIONS_INIT"
  "recap_graph_recapture_begin.options|ERROR_INVALID_USAGE|update.h: options NULL means the last capture's options, and the fixture's graph holds no capture, which is INVALID_USAGE"
  "recap_graph_update_policy_set.policy|SUCCESS|update.h: policy NULL means RECAP_UPDATE_POLICY_INIT"
  "recap_graph_set_update_policy.policy|SUCCESS|update.h: the deprecated name of recap_graph_update_policy_set"
  "recap_capture_scope_begin.options|SUCCESS|graph.h: options NULL means defaults"
  "recap_graphed_create.options|SUCCESS|graphed.h: options NULL means defaults"
  "recap_rng_dropout.mask|SUCCESS|rng.h: mask may be NULL"
  "recap_graphed_graphs.forward|SUCCESS|graphed.h: either out-parameter may be NULL when not wanted"
  "recap_graphed_graphs.backward|SUCCESS|graphed.h: either out-parameter may be NULL when not wanted"
  "recap_graph_set_destroy.set|SUCCESS|graph_set.h: destroying NULL is a no-op"
  "recap_graph_set_create.user_data|SUCCESS|graph_set.h: user data is the caller's, handed to the step as it is"
  "recap_graph_set_run.padded|SUCCESS|graph_set.h: padded may be NULL"
  "recap_graph_set_run.graphed|SUCCESS|graph_set.h: graphed may be NULL"
  "recap_graph_set_evict_idle.evicted|SUCCESS|graph_set.h: evicted may be NULL"
  "recap_graph_set_sizes.sizes|SUCCESS|graph_set.h: sizes may be NULL (count alone is asked)"
  "recap_graph_set_param_set.members|SUCCESS|graph_set.h: members may be NULL when not wanted"
  "recap_graph_collectives.hash|SUCCESS|nccl.h: hash may be NULL when not wanted"
  "recap_graph_param_declare.param|ERROR_INVALID_USAGE|params.h: param may be NULL, and the fixture's graph is not capturing, which is INVALID_USAGE"
  "recap_graph_param_device.param|ERROR_INVALID_USAGE|params.h: param may be NULL, and the fixture's graph is not capturing, which is INVALID_USAGE"
  "recap_graph_kernel_shape_set.block|ERROR_INVALID_USAGE|params.h: block NULL keeps the block, and the fixture's graph holds no capture, which is INVALID_USAGE"
  "recap_graph_rebind.patched|ERROR_INVALID_USAGE|rebind.h: patched may be NULL, and the fixture's graph was not captured for rebinding, which is INVALID_USAGE"
)

# ---- a valid value for every parameter type -----------------------------------------------------
# "key|C expression" over the fixture `f` of tests/reliability/bad_input.h. Keys are looked up in this
# order: "function.parameter", "type parameter", "type" (types written as "const char *").
set(VALUES
  "recap_graph_t|f->graph"
  "recap_graph_t *|&f->graph_out"
  "recap_graph_t * backward|&f->graph_out2"
  "recap_graphed_graphs.forward|&f->borrowed_graph"
  "recap_graphed_graphs.backward|&f->borrowed_graph2"
  "recap_generator_t|f->gen"
  "recap_generator_t *|&f->gen_out"
  "recap_graphed_t|f->graphed"
  "recap_graphed_t *|f->graphed_out"
  "recap_stream_t|f->stream"
  "recap_stream_t *|&f->stream_out"
  "void **|&f->ptr_out"
  "void *|f->block"
  "void * user_data|f"
  "const void *|f->block"
  "size_t|1"
  "size_t *|&f->size_out"
  "unsigned|0"
  "uint64_t|4"
  "uint64_t *|&f->u64_out"
  "int|0"
  "int training|1"
  "int device|-1"
  "int *|&f->int_out"
  "float|0.5f"
  "float *|f->floats"
  "const float *|f->floats"
  "int32_t|0"
  "int32_t high|10"
  "int32_t *|(int32_t *)f->floats"
  "uint8_t *|f->mask"
  "char *|f->string"
  "char **|&f->string_out"
  "const char *|\"recap\""
  "const char * name|\"max_split_size\""
  "const char * value|\"0\""
  "const char * conf|\"max_split_size:0\""
  "const char * path|f->path"
  "recap_pool_id_t|f->pool"
  "recap_pool_id_t *|&f->pool_out"
  "recap_graph_state_t *|&f->graph_state_out"
  "recap_pool_info_t *|&f->pool_info"
  "recap_block_info_t *|&f->block_info"
  "recap_memory_stats_t *|&f->stats"
  "const recap_capture_options_t *|&f->capture_options"
  "const recap_scope_options_t *|&f->scope_options"
  "const recap_graphed_options_t *|&f->graphed_options"
  "const recap_callable_desc_t *|f->descs"
  "const recap_buffer_t *|f->inputs"
  "const recap_buffer_t * grad_outputs|f->grad_outputs"
  "const recap_buffer_t **|&f->buffers_out"
  "recap_cuda_graph_t *|&f->cuda_graph_out"
  "recap_cuda_graph_exec_t *|&f->cuda_exec_out"
  "recap_graph_info_t **|&f->info_out"
  "const recap_graph_info_t *|&f->info"
  "recap_graph_info_t *|f->heap_info"
  "recap_philox_state_t *|&f->philox"
  "recap_liveness_input_t *|f->liveness_out"
  "recap_log_fn|bim_log"
  "recap_log_level_t|RECAP_LOG_LEVEL_WARN"
  "recap_status_t|RECAP_SUCCESS"
  "recap_set_last_error.status|RECAP_ERROR_CUDA"
  "recap_node_type_t|RECAP_NODE_KERNEL"
  "recap_update_reason_t|RECAP_UPDATE_REASON_NONE"
  "const recap_update_policy_t *|&f->update_policy"
  "recap_update_stats_t *|&f->update_stats"
  "recap_graph_memory_t *|&f->graph_memory"
  "recap_pool_memory_t *|&f->pool_memory"
  "recap_sleep_mode_t|RECAP_SLEEP_DISCARD"
  "recap_pool_state_t|RECAP_POOL_AWAKE"
  "recap_pool_state_t *|&f->pool_state_out"
  "recap_capture_mode_t|RECAP_CAPTURE_MODE_GLOBAL"
  "recap_region_kind_t|RECAP_REGION_WHILE"
  "recap_cond_t|f->cond"
  "recap_cond_t *|&f->cond_out"
  "const uint32_t *|(const uint32_t *)f->block"
  "uint32_t *|(uint32_t *)f->block"
  "const recap_cond_compare_t *|&f->cond_compare"
  "const recap_loop_t *|&f->loop"
  "const recap_rebind_t *|f->rebinds"
  "recap_rebind_site_t *|f->rebind_sites"
  "recap_graph_set_t|f->graph_set"
  "recap_graph_set_t *|&f->graph_set_out"
  "recap_step_fn|bim_step"
  "const recap_graph_set_options_t *|&f->graph_set_options"
  "recap_graph_set_member_t *|&f->set_member"
  "recap_graph_set_info_t *|&f->set_info"
  "double idle_seconds|3600.0"
  "recap_nccl_comm_t|(recap_nccl_comm_t)f->block"
  "recap_nccl_dtype_t|RECAP_NCCL_FLOAT32"
  "recap_nccl_op_t|RECAP_NCCL_SUM"
  "recap_nccl_policy_t|RECAP_NCCL_SERIALIZE"
  "recap_collective_kind_t|RECAP_COLLECTIVE_ALL_REDUCE"
  "recap_collective_t *|f->collectives"
  "uint32_t|0"
  "recap_param_t|f->param"
  "recap_param_t *|&f->param_out"
  "recap_param_type_t|RECAP_PARAM_INT32"
  "const recap_param_value_t *|f->param_values"
  "recap_param_info_t *|&f->param_info"
  "recap_param_site_t *|f->param_sites"
  "unsigned *|f->shape"
  "const unsigned *|f->shape"
)

# ---- reading the headers --------------------------------------------------------------------------

include("${CMAKE_CURRENT_LIST_DIR}/PublicHeaders.cmake")
recap_public_header_text("${SOURCE_DIR}" text)

# Typedefs of pointers: recap's own handles (typedef struct recap_x *recap_x_t), other struct
# pointers (streams, CUDA graphs) and function pointers (callbacks).
set(handle_types "")
set(pointer_types "")
string(REGEX MATCHALL "typedef[ \t\r\n]+struct[ \t\r\n]+[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*\\*[ \t\r\n]*[A-Za-z_][A-Za-z0-9_]*"
       typedefs "${text}")
foreach(t IN LISTS typedefs)
  string(REGEX REPLACE "typedef[ \t\r\n]+struct[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\\*[ \t\r\n]*([A-Za-z_][A-Za-z0-9_]*).*" "\\1|\\2" pair "${t}")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 tag)
  list(GET pair 1 name)
  list(APPEND pointer_types "${name}")
  if(tag MATCHES "^recap_")
    list(APPEND handle_types "${name}")
  endif()
endforeach()
string(REGEX MATCHALL "typedef[^;{}]*\\([ \t\r\n]*\\*[ \t\r\n]*[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*\\)" fnptrs "${text}")
foreach(t IN LISTS fnptrs)
  string(REGEX REPLACE ".*\\([ \t\r\n]*\\*[ \t\r\n]*([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\\)$" "\\1" name "${t}")
  list(APPEND pointer_types "${name}")
endforeach()

# "const  recap_buffer_t**" -> "const recap_buffer_t **"
function(canonical_type in out_var)
  string(REPLACE "*" " * " t "${in}")
  string(REGEX REPLACE "[ \t\r\n]+" " " t "${t}")
  string(STRIP "${t}" t)
  string(REPLACE "* *" "**" t "${t}")
  string(REPLACE "* *" "**" t "${t}")
  set(${out_var} "${t}" PARENT_SCOPE)
endfunction()

function(lookup_value fn param type out_var)
  foreach(key IN ITEMS "${fn}.${param}" "${type} ${param}" "${type}")
    foreach(entry IN LISTS VALUES)
      string(FIND "${entry}" "|" bar)
      string(SUBSTRING "${entry}" 0 ${bar} k)
      if(k STREQUAL key)
        math(EXPR start "${bar} + 1")
        string(SUBSTRING "${entry}" ${start} -1 v)
        set(${out_var} "${v}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endforeach()
  set(${out_var} "" PARENT_SCOPE)
endfunction()

# The allow-list entry of fn.param (or of its type): sets <out>_expect and <out>_why, empty if none.
set(allow_used "")
macro(lookup_allow fn param type out)
  set(${out}_expect "")
  set(${out}_why "")
  foreach(entry IN LISTS ALLOW)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 k)
    list(GET parts 1 e)
    list(GET parts 2 w)
    if(k STREQUAL "${fn}.${param}" OR k STREQUAL "type:${type}")
      set(${out}_expect "${e}")
      set(${out}_why "${w}")
      list(APPEND allow_used "${k}")
    endif()
  endforeach()
endmacro()

string(REGEX MATCHALL "RECAP_API[ \t\r\n]+[^;{}]*\\)" decls "${text}")
if(NOT decls)
  message(FATAL_ERROR "bad-input matrix: no RECAP_API declarations found under ${SOURCE_DIR}/include")
endif()

set(errors "")
set(functions "")
set(thunks "")
set(table "")
set(ncases 0)
set(nfunctions_with_cases 0)
foreach(decl IN LISTS decls)
  recap_split_declaration("${decl}" fn ret params_text)
  canonical_type("${ret}" ret)
  list(APPEND functions "${fn}")
  if(params_text MATCHES "\\(")
    list(APPEND errors "${fn}: a parameter is a function pointer written out in place; give it a typedef so the matrix can read it")
    continue()
  endif()

  # Parameters: canonical type and name of each.
  # A variadic function's "..." takes nothing here: its cases pass the named parameters only.
  string(REGEX REPLACE ",[ \t\r\n]*\\.\\.\\.$" "" params_text "${params_text}")
  set(ptypes "")
  set(pnames "")
  if(NOT params_text STREQUAL "void" AND NOT params_text STREQUAL "")
    string(REPLACE "," ";" plist "${params_text}")
    foreach(p IN LISTS plist)
      string(STRIP "${p}" p)
      string(REGEX MATCH "[A-Za-z_][A-Za-z0-9_]*$" pname "${p}")
      string(REGEX REPLACE "[A-Za-z_][A-Za-z0-9_]*$" "" ptype "${p}")
      canonical_type("${ptype}" ptype)
      if(pname STREQUAL "" OR ptype STREQUAL "")
        list(APPEND errors "${fn}: cannot read parameter '${p}' (every parameter needs a name)")
        continue()
      endif()
      list(APPEND ptypes "${ptype}")
      list(APPEND pnames "${pname}")
    endforeach()
  endif()
  list(LENGTH pnames nparams)

  # Which parameters are pointers, and which are recap handles.
  set(pointer_indices "")
  set(handle_indices "")
  if(nparams GREATER 0)
    math(EXPR last "${nparams} - 1")
    foreach(i RANGE ${last})
      list(GET ptypes ${i} t)
      string(REGEX REPLACE "^const " "" bare "${t}")
      if(t MATCHES "\\*")
        list(APPEND pointer_indices ${i})
      elseif(bare IN_LIST pointer_types)
        list(APPEND pointer_indices ${i})
        if(bare IN_LIST handle_types)
          list(APPEND handle_indices ${i})
        endif()
      endif()
    endforeach()
  endif()
  if(pointer_indices STREQUAL "")
    continue() # nothing to pass NULL to; wrong values and states are the hand-written cases
  endif()

  # A valid value for every parameter.
  set(values "")
  set(ok TRUE)
  foreach(i RANGE ${last})
    list(GET ptypes ${i} t)
    list(GET pnames ${i} n)
    lookup_value("${fn}" "${n}" "${t}" v)
    if(v STREQUAL "")
      list(APPEND errors "${fn}: no valid value is known for parameter '${n}' of type '${t}': add one to VALUES in cmake/GenBadInputMatrix.cmake (and the fixture field it names to tests/reliability/bad_input.h)")
      set(ok FALSE)
    endif()
    list(APPEND values "${v}")
  endforeach()
  if(NOT ok)
    continue()
  endif()

  set(status_fn FALSE)
  if(ret STREQUAL "recap_status_t")
    set(status_fn TRUE)
  endif()

  # cases: kind, parameter index, replacement expression, expectation, note
  set(fn_cases 0)
  foreach(i IN LISTS pointer_indices)
    list(GET ptypes ${i} t)
    list(GET pnames ${i} n)
    string(REGEX REPLACE "^const " "" bare "${t}")
    lookup_allow("${fn}" "${n}" "${bare}" allow)
    set(kinds "")
    if(allow_expect STREQUAL "SKIP")
      # NULL is an ordinary value of this type: no case.
    elseif(allow_expect STREQUAL "")
      if(NOT status_fn)
        list(APPEND errors "${fn} returns ${ret}, not a status, so it cannot report a NULL '${n}': document what NULL does and allow-list it in cmake/GenBadInputMatrix.cmake")
      else()
        list(APPEND kinds "null|NULL|ERROR_INVALID_ARGUMENT")
      endif()
    else()
      if(allow_expect STREQUAL "VOID")
        list(APPEND kinds "null|NULL|VOID")
      elseif(NOT status_fn)
        list(APPEND errors "${fn}.${n}: allow-list expectation ${allow_expect} needs a function that returns a status")
      else()
        list(APPEND kinds "null|NULL|${allow_expect}")
      endif()
    endif()
    if(i IN_LIST handle_indices)
      list(APPEND kinds "destroyed|f->dead_${bare}|ERROR_INVALID_ARGUMENT")
      list(APPEND kinds "foreign|(${bare})(void *)f->foreign|ERROR_INVALID_ARGUMENT")
    endif()
    foreach(k IN LISTS kinds)
      string(REPLACE "|" ";" kparts "${k}")
      list(GET kparts 0 kind)
      list(GET kparts 1 replacement)
      list(GET kparts 2 expect)
      set(args "")
      foreach(j RANGE ${last})
        list(GET values ${j} v)
        if(j EQUAL i)
          set(v "${replacement}")
        endif()
        if(args STREQUAL "")
          set(args "${v}")
        else()
          string(APPEND args ", ${v}")
        endif()
      endforeach()
      if(status_fn)
        string(APPEND thunks "static int bim_case_${ncases}(bim_fixture_t *f) {\n  (void)f;\n  return (int)${fn}(${args});\n}\n")
      else()
        string(APPEND thunks "static int bim_case_${ncases}(bim_fixture_t *f) {\n  (void)f;\n  ${fn}(${args});\n  return BIM_NO_STATUS;\n}\n")
      endif()
      if(expect STREQUAL "VOID")
        set(expect_c "BIM_NO_STATUS")
      else()
        set(expect_c "RECAP_${expect}")
      endif()
      string(APPEND table "  {\"${fn}(${n}=${kind})\", \"${fn}\", BIM_${kind}, ${expect_c}, bim_case_${ncases}, NULL},\n")
      math(EXPR ncases "${ncases} + 1")
      math(EXPR fn_cases "${fn_cases} + 1")
    endforeach()
  endforeach()
  if(fn_cases GREATER 0)
    math(EXPR nfunctions_with_cases "${nfunctions_with_cases} + 1")
  endif()
endforeach()

# An allow-list entry that matched nothing is stale: the function or parameter changed.
foreach(entry IN LISTS ALLOW)
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 k)
  if(NOT k IN_LIST allow_used)
    list(APPEND errors "allow-list entry '${k}' matches no parameter of any public function: update cmake/GenBadInputMatrix.cmake")
  endif()
endforeach()

if(errors)
  list(JOIN errors "\n  " joined)
  message(FATAL_ERROR "bad-input matrix: cannot generate the cases:\n  ${joined}")
endif()

list(LENGTH functions nfunctions)
set(names_c "")
foreach(fn IN LISTS functions)
  string(APPEND names_c "  \"${fn}\",\n")
endforeach()

set(out "/* Generated by cmake/GenBadInputMatrix.cmake from include/recap.h and the headers in include/recap/.
 * Do not edit: change the headers or the generator. ${ncases} cases over ${nfunctions_with_cases}
 * of the ${nfunctions} public functions (the others take no pointer). */

${thunks}
static const bim_case_t bim_generated_cases[] = {
${table}};

/* Every public function, in header order. */
static const char *const bim_public_functions[] = {
${names_c}};
")
file(WRITE "${OUTPUT}" "${out}")
message(STATUS "bad-input matrix: ${ncases} generated cases over ${nfunctions_with_cases} of ${nfunctions} public functions")
