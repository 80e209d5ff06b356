"""What the custom-call targets registered without a description are: the FFI, TPU and
marker targets of ops/custom_calls/generic.py, ops/custom_calls/linalg.py, ops/sharding.py,
ops/check.py, ops/random.py and ops/dynamic.py, described for the README's table of targets.

The legacy families describe their targets where they register them (`info=`); every
built-in target must have a description (`python -m shlo2jax.tools.custom_call_table`
refuses a target without one, so a new target cannot be left out of the README).
"""

from __future__ import annotations

from shlo2jax.registry import TargetInfo, describe

_F4 = "f32, f64, c64, c128"
_T_GENERIC = "tests/ops/custom_calls/test_generic.py::"
_T_LINALG = "tests/ops/custom_calls/test_linalg.py::"
_BC = "tests/test_back_compat.py::test_back_compat"
_T_LEGACY = "tests/ops/custom_calls/test_legacy.py::"


def _lapack_ffi(kernel, targets, jax, tests, dtypes=_F4):
    describe(targets, TargetInfo(kernel, ("FFI",), jax, dtypes, tests))


_lapack_ffi("LAPACK getrf (LU)", ["lapack_sgetrf_ffi", "lapack_dgetrf_ffi", "lapack_cgetrf_ffi",
                                  "lapack_zgetrf_ffi"],
            "0.4.32 ..", (_T_LINALG + "test_getrf_lapack_format", _BC))
_lapack_ffi("LAPACK geqrf (QR)", ["lapack_sgeqrf_ffi", "lapack_dgeqrf_ffi", "lapack_cgeqrf_ffi",
                                  "lapack_zgeqrf_ffi"], "0.4.32 ..", (_BC,))
_lapack_ffi("LAPACK orgqr/ungqr (Householder product)",
            ["lapack_sorgqr_ffi", "lapack_dorgqr_ffi", "lapack_cungqr_ffi", "lapack_zungqr_ffi"],
            "0.4.32 ..", (_BC,))
_lapack_ffi("LAPACK geqp3 (pivoted QR)", ["lapack_sgeqp3_ffi", "lapack_dgeqp3_ffi",
                                          "lapack_cgeqp3_ffi", "lapack_zgeqp3_ffi"],
            "0.5.0 ..", (_T_LINALG + "test_pivoted_qr_geqp3",))
_lapack_ffi("LAPACK ormqr/unmqr (apply Q)",
            ["lapack_sormqr_ffi", "lapack_dormqr_ffi", "lapack_cunmqr_ffi", "lapack_zunmqr_ffi"],
            "0.10.0 ..", (_T_LINALG + "test_ormqr_applies_q",))
_lapack_ffi("LAPACK potrf (Cholesky)", ["lapack_spotrf_ffi", "lapack_dpotrf_ffi",
                                        "lapack_cpotrf_ffi", "lapack_zpotrf_ffi"],
            "0.4.31 ..", (_T_LINALG + "test_potrf_reads_one_triangle", _BC))
_lapack_ffi("LAPACK syevd/heevd (eigh)", ["lapack_ssyevd_ffi", "lapack_dsyevd_ffi",
                                          "lapack_cheevd_ffi", "lapack_zheevd_ffi"],
            "0.4.32 ..", (_T_LINALG + "test_syevd_eigenpairs", _BC))
_lapack_ffi("LAPACK gesdd (SVD)", ["lapack_sgesdd_ffi", "lapack_dgesdd_ffi", "lapack_cgesdd_ffi",
                                   "lapack_zgesdd_ffi"],
            "0.4.32 ..", (_T_LINALG + "test_gesdd_output_order", _BC))
_lapack_ffi("LAPACK gesvd (SVD, QR algorithm)", ["lapack_sgesvd_ffi", "lapack_dgesvd_ffi",
                                                 "lapack_cgesvd_ffi", "lapack_zgesvd_ffi"],
            "0.6.0 ..", (_T_LINALG + "test_svd_kernels",))
_lapack_ffi("LAPACK geev (eig)", ["lapack_sgeev_ffi", "lapack_dgeev_ffi", "lapack_cgeev_ffi",
                                  "lapack_zgeev_ffi"],
            "0.4.32 ..", (_T_LINALG + "test_geev_real_splits_eigenvalues", _BC))
_lapack_ffi("LAPACK gees (Schur)", ["lapack_sgees_ffi", "lapack_dgees_ffi", "lapack_cgees_ffi",
                                    "lapack_zgees_ffi"],
            "0.4.38 ..", (_T_LINALG + "test_gees_real_eigenvalue_pairs", _BC))
_lapack_ffi("LAPACK gehrd (Hessenberg)", ["lapack_sgehrd_ffi", "lapack_dgehrd_ffi",
                                          "lapack_cgehrd_ffi", "lapack_zgehrd_ffi"],
            "0.4.34 ..", (_BC,))
_lapack_ffi("LAPACK sytrd/hetrd (tridiagonal)", ["lapack_ssytrd_ffi", "lapack_dsytrd_ffi",
                                                 "lapack_chetrd_ffi", "lapack_zhetrd_ffi"],
            "0.4.38 ..", (_BC,))
_lapack_ffi("LAPACK/BLAS trsm (triangular solve)", ["lapack_strsm_ffi", "lapack_dtrsm_ffi",
                                                    "lapack_ctrsm_ffi", "lapack_ztrsm_ffi"],
            "0.4.38 ..", (_T_LINALG + "test_trsm", _BC))
_lapack_ffi("LAPACK gtsv (tridiagonal solve)", ["lapack_sgtsv_ffi", "lapack_dgtsv_ffi",
                                                "lapack_cgtsv_ffi", "lapack_zgtsv_ffi"],
            "0.5.0 ..", (_T_LINALG + "test_gtsv", _BC))
_lapack_ffi("Tridiagonal solve with perturbed pivots",
            ["tridiagonal_solve_perturbed_ffi", "cu_tridiagonal_solve_perturbed",
             "hip_tridiagonal_solve_perturbed"], "0.10.0 ..",
            (_T_LINALG + "test_tridiagonal_solve_perturbed",))


def _lapack_operands(kernel, targets, jax, tests, dtypes=_F4):
    describe(targets, TargetInfo(kernel, ("operands",), jax, dtypes, tests))


_lapack_operands("LAPACK getrf (LU), pre-FFI", ["lapack_sgetrf", "lapack_dgetrf", "lapack_cgetrf",
                                                "lapack_zgetrf"],
                 "0.4.1 .. 0.4.33", (_T_LINALG + "test_legacy_getrf_tuple_result",
                                     _T_LINALG + "test_old_name_with_ffi_signature",
                                     _T_LINALG + "test_lapack_operand_forms"))
_lapack_operands("LAPACK geqrf (QR), pre-FFI", ["lapack_sgeqrf", "lapack_dgeqrf", "lapack_cgeqrf",
                                                "lapack_zgeqrf"],
                 "0.4.1 .. 0.4.34", (_T_LINALG + "test_lapack_operand_forms",))
_lapack_operands("LAPACK orgqr/ungqr, pre-FFI", ["lapack_sorgqr", "lapack_dorgqr", "lapack_cungqr",
                                                 "lapack_zungqr"],
                 "0.4.1 .. 0.4.34", (_T_LINALG + "test_lapack_operand_forms",))
_lapack_operands("LAPACK potrf (Cholesky), pre-FFI", ["lapack_spotrf", "lapack_dpotrf",
                                                      "lapack_cpotrf", "lapack_zpotrf"],
                 "0.4.1 .. 0.4.34", (_T_LINALG + "test_legacy_potrf_and_syevd_with_workspaces",
                                     _T_LINALG + "test_lapack_operand_forms"))
_lapack_operands("LAPACK gesdd (SVD), pre-FFI", ["lapack_sgesdd", "lapack_dgesdd", "lapack_cgesdd",
                                                 "lapack_zgesdd"],
                 "0.4.1 .. 0.4.34", (_T_LINALG + "test_lapack_operand_forms",))
_lapack_operands("LAPACK syevd/heevd (eigh), pre-FFI", ["lapack_ssyevd", "lapack_dsyevd",
                                                        "lapack_cheevd", "lapack_zheevd"],
                 "0.4.1 .. 0.4.34", (_T_LINALG + "test_legacy_potrf_and_syevd_with_workspaces",
                                     _T_LINALG + "test_lapack_operand_forms",
                                     _T_LEGACY + "test_mhlo_module_bytecode_with_legacy_lapack"))
_lapack_operands("BLAS trsm (triangular solve), pre-FFI", ["blas_strsm", "blas_dtrsm",
                                                           "blas_ctrsm", "blas_ztrsm"],
                 "0.4.1 .. 0.4.37; exports until 0.6.1",
                 (_T_LINALG + "test_legacy_blas_trsm_with_alpha",
                  _T_LINALG + "test_lapack_operand_forms"))


def _gpu_ffi(kernel, targets, jax, tests, dtypes=_F4):
    describe(targets, TargetInfo(kernel, ("FFI",), jax, dtypes, tests))


_gpu_ffi("cuSOLVER/hipSOLVER getrf (LU)", ["cusolver_getrf_ffi", "hipsolver_getrf_ffi"],
         "0.4.32 ..", (_BC, _T_LINALG + "test_platform_exports_match_cpu"))
_gpu_ffi("cuBLAS/hipBLAS getrf_batched (LU)", ["cublas_getrf_batched_ffi",
                                               "hipblas_getrf_batched_ffi"],
         "none released (main branch 2024-08-06 .. 08-14)",
         (_T_LINALG + "test_blas_batched_getrf_has_solver_outputs",))
_gpu_ffi("cuBLAS/hipBLAS geqrf_batched (QR), FFI spelling", ["cublas_geqrf_batched_ffi",
                                                             "hipblas_geqrf_batched_ffi"],
         "none (jaxlib never registered this name; accepted like geqrf)",
         (_T_LINALG + "test_unemitted_ffi_spellings",))
_gpu_ffi("cuSOLVER/hipSOLVER geqrf (QR)", ["cusolver_geqrf_ffi", "hipsolver_geqrf_ffi"],
         "0.4.35 ..", (_BC,))
_gpu_ffi("cuSOLVER/hipSOLVER orgqr (Householder product)", ["cusolver_orgqr_ffi",
                                                            "hipsolver_orgqr_ffi"],
         "0.4.35 ..", (_BC, _T_LINALG + "test_platform_exports_match_cpu"))
_gpu_ffi("cuSOLVER/hipSOLVER ormqr (apply Q)", ["cusolver_ormqr_ffi", "hipsolver_ormqr_ffi"],
         "0.10.0 ..", (_T_LINALG + "test_ormqr_applies_q",))
_gpu_ffi("cuSOLVER/hipSOLVER potrf (Cholesky)", ["cusolver_potrf_ffi", "hipsolver_potrf_ffi"],
         "0.8.0 ..", (_BC, _T_LINALG + "test_platform_exports_match_cpu"))
_gpu_ffi("cuSOLVER/hipSOLVER syevd (eigh)", ["cusolver_syevd_ffi", "hipsolver_syevd_ffi"],
         "0.4.35 ..", (_BC, _T_LINALG + "test_platform_exports_match_cpu"))
_gpu_ffi("cuSOLVER/hipSOLVER gesvd (SVD)", ["cusolver_gesvd_ffi", "hipsolver_gesvd_ffi"],
         "0.4.35 ..", (_BC, _T_LINALG + "test_svd_kernels"))
_gpu_ffi("cuSOLVER/hipSOLVER gesvdj, gesvdp (SVD, Jacobi / polar)",
         ["cusolver_gesvdj_ffi", "hipsolver_gesvdj_ffi", "cusolver_gesvdp_ffi",
          "hipsolver_gesvdp_ffi"],
         "gesvdj 0.4.35 ..; gesvdp 0.8.1 ..", (_BC, _T_LINALG + "test_svd_kernels"))
_gpu_ffi("cuSOLVER/hipSOLVER gesdd (SVD)", ["cusolver_gesdd_ffi", "hipsolver_gesdd_ffi"],
         "0.10.0 ..", (_BC, _T_LINALG + "test_svd_kernels"))
_gpu_ffi("cuSOLVER/hipSOLVER sytrd (tridiagonal)", ["cusolver_sytrd_ffi", "hipsolver_sytrd_ffi"],
         "0.5.0 ..", (_BC, _T_LINALG + "test_platform_exports_match_cpu"))
_gpu_ffi("cuSOLVER/hipSOLVER syrk (symmetric product)", ["cusolver_syrk_ffi",
                                                         "hipsolver_syrk_ffi"],
         "0.4.32 ..", (_T_LINALG + "test_syrk_writes_the_lower_triangle",))
_gpu_ffi("cuSOLVER geev (eig)", ["cusolver_geev_ffi"], "0.8.0 ..",
         (_T_LINALG + "test_cusolver_geev_packs_real_eigenvectors",))
_gpu_ffi("GPU hybrid eig (MAGMA/LAPACK on the host)",
         ["cuhybrid_eig_real", "cuhybrid_eig_comp", "hiphybrid_eig_real", "hiphybrid_eig_comp"],
         "0.4.36 ..", (_T_LINALG + "test_gpu_hybrid_eig",))
_gpu_ffi("GPU hybrid geqp3 (pivoted QR, MAGMA)", ["cuhybrid_geqp3", "hiphybrid_geqp3"],
         "0.5.1 ..", (_T_LINALG + "test_pivoted_qr_geqp3",))
_gpu_ffi("cuSOLVER csrlsvqr (sparse solve)", ["cusolver_csrlsvqr_ffi"], "0.5.1 ..",
         (_T_LINALG + "test_sparse_csrlsvqr_solve",))
_gpu_ffi("cuSPARSE/hipSPARSE gtsv2 (tridiagonal solve)", ["cusparse_gtsv2_ffi",
                                                          "hipsparse_gtsv2_ffi"],
         "0.6.1 ..", (_BC,), dtypes="f32, f64")
_gpu_ffi("Cholesky rank-1 update", ["cu_cholesky_update_ffi", "hip_cholesky_update_ffi"],
         "0.4.32 ..", (_T_LINALG + "test_cholesky_update_kernel",), dtypes="f32, f64")
_gpu_ffi("threefry2x32 random bits", ["cu_threefry2x32_ffi", "hip_threefry2x32_ffi"],
         "0.4.31 ..", (_T_GENERIC + "test_threefry_matches_jax",
                       _T_GENERIC + "test_gpu_threefry_kernel_export", _BC), dtypes="u32")
describe(["cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation"],
         TargetInfo("LU pivots to permutation", ("descriptor", "FFI"),
                    "0.4.1 .. 0.4.26 (descriptor); 0.4.27 .. 0.4.31 (FFI, permutation_size "
                    "attribute); 0.4.32 .. (FFI)", "i32",
                    (_T_LINALG + "test_pivots_to_permutation_skips_out_of_range",
                     _T_LINALG + "test_lu_pivots_to_permutation_forms", _BC)))

_TPU = "0.4.7 .. (before: the same call through XLA's client)"
describe(["Qr"], TargetInfo("TPU Qr (geqrf)", ("none",), _TPU, "f32, c64", (_BC,)))
describe(["ProductOfElementaryHouseholderReflectors"],
         TargetInfo("TPU ProductOfElementaryHouseholderReflectors", ("none",), _TPU, "f32, c64",
                    (_BC, _T_LINALG + "test_platform_exports_match_cpu")))
describe(["Eigh"], TargetInfo("TPU Eigh", ("attributes",), _TPU, "f32, c64",
                              (_BC, _T_LINALG + "test_platform_exports_match_cpu")))
describe(["LuDecomposition"], TargetInfo("TPU LuDecomposition", ("none",), _TPU, "f32, c64",
                                         (_BC, _T_LINALG + "test_platform_exports_match_cpu")))
describe(["ApproxTopK"], TargetInfo("Approximate top-k", ("attributes",), "0.4.10 ..", "any",
                                    (_T_GENERIC + "test_approx_top_k_exact_answer", _BC)))
describe(["PartialReduce"], TargetInfo("TPU PartialReduce (XLA's approximate top-k)",
                                       ("attributes",), "none (XLA writes it into HLO dumps)",
                                       "any", (_T_GENERIC + "test_partial_reduce_then_aggregate",)))
describe(["X64SplitLow", "X64SplitHigh", "X64Combine"],
         TargetInfo("TPU 64-bit splitting", ("none",), "none (XLA's TPU rewriting)", "64-bit",
                    (_T_GENERIC + "test_x64_split_and_combine",)))
describe(["AllocateBuffer"], TargetInfo("lax.empty buffer", ("none",), "0.7.2 ..", "any",
                                        (_T_GENERIC + "test_allocate_buffer",)))
describe(["annotate_device_placement", "MoveToHost", "MoveToDevice"],
         TargetInfo("Memory placement markers (identity)", ("attributes",),
                    "annotate_device_placement 0.4.15 ..; MoveToHost/Device from XLA", "any",
                    (_T_GENERIC + "test_placement_markers_are_identity", _BC)))
describe(["dce_sink"], TargetInfo("prevent_mlir_dce sink (no results)", ("none",), "0.7.0 ..",
                                  "any", (_T_GENERIC + "test_dce_sink_has_no_effect_on_values",)))
describe(["shape_assertion"], TargetInfo("Shape-polymorphism assertion", ("attributes",),
                                         "0.4.14 ..", "i32/i64 scalars",
                                         ("tests/ops/test_dynamic.py::"
                                          "test_shape_assertion_custom_call", _BC)))
describe(["stablehlo.dynamic_top_k", "stablehlo.dynamic_approx_top_k",
          "stablehlo.dynamic_rng_bit_generator", "stablehlo.dynamic_reduce_window"],
         TargetInfo("jax.export's dynamic-shape ops", ("operands",),
                    "dynamic_reduce_window/rng_bit_generator 0.4.13 ..; dynamic_top_k 0.4.15 ..; "
                    "dynamic_approx_top_k 0.4.29 ..", "any",
                    (_T_GENERIC + "test_dynamic_top_k",
                     _T_GENERIC + "test_dynamic_rng_bit_generator_matches_static_op",
                     _T_GENERIC + "test_dynamic_reduce_window_sum", _BC)))
describe(["Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "xla.sdy.GlobalToLocalShape",
          "xla.sdy.LocalToGlobalShape", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingConstraint"],
         TargetInfo("Sharding and shard_map markers (GSPMD, serialized Shardy)", ("attributes",),
                    "0.4.4 .. (xla.sdy.* 0.7.0 ..)", "any",
                    ("tests/ops/test_sharding.py::test_markers_on_one_device_are_identity",
                     "tests/spmd/test_sharding.py::test_on_a_2x4_mesh",
                     "tests/spmd/test_sharding.py::test_a_manual_region_needs_its_devices", _BC)))
describe(["check.eq", "check.expect_eq", "check.expect_almost_eq", "check.expect_close"],
         TargetInfo("StableHLO interpreter checks (conformance tests)", ("attributes",),
                    "none (StableHLO's test suite)", "any",
                    ("tests/ops/test_check.py::test_check_eq_returns_whether_the_operands_agree",
                     "tests/ops/test_check.py::"
                     "test_expect_checks_are_recorded_with_their_kind_and_operands",
                     "tests/tools/test_conformance.py::test_right_value_passes",
                     "tests/tools/test_conformance.py::test_wrong_value_fails_and_says_where")))
describe(["TopK"],
         TargetInfo("XLA's TopK (a greater-than sort cut to its first k, after optimizations)",
                    ("none",), "none (XLA's own rewrite of sort, in HLO dumps)", "any",
                    ("tests/sources/test_hlo.py::test_xla_topk_custom_call_of_an_optimized_dump",)))
describe(["__cublas$gemm"],
         TargetInfo("XLA:GPU cuBLAS gemm (after-optimizations HLO dumps)", ("attributes",),
                    "none (XLA:GPU's own rewrite of dot, in HLO dumps)", "f16, bf16, f32, f64, c64, c128",
                    ("tests/sources/test_hlo.py::test_cublas_gemm_of_a_gpu_dump_runs_as_a_dot",)))
_UNRUNNABLE = "reported at load (needs the platform or the exporting process)"
describe(["tpu_custom_call", "triton_kernel_call", "triton_kernel_call_ffi",
          "__gpu$xla.gpu.triton", "mosaic_gpu", "mosaic_gpu_v2", "__cudnn$fusion"],
         TargetInfo("Compiled kernels (Pallas/Mosaic/Triton/cuDNN fusions)", ("attributes",),
                    "tpu_custom_call 0.4.14 ..; triton_kernel_call 0.4.11 ..; __gpu$xla.gpu.triton 0.4.25 ..; mosaic_gpu 0.4.27 ..; __cudnn$fusion 0.4.32 ..; mosaic_gpu_v2 0.7.1 ..; triton_kernel_call_ffi 0.10.1 ..",
                    _UNRUNNABLE, (_T_GENERIC + "test_platform_bound_kernels_reported_at_load",
                                  _T_GENERIC + "test_unrunnable_targets_name_what_they_need", _BC)))
describe(["xla_python_cpu_callback", "xla_python_gpu_callback", "xla_ffi_python_cpu_callback",
          "xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_cpu_callback",
          "xla_ffi_partitioned_python_gpu_callback", "tf.call_tf_function"],
         TargetInfo("Host callbacks, jax2tf.call_tf", ("attributes",),
                    "xla_python_*_callback 0.4.1 .. 0.6.0, then the xla_ffi_* callbacks; tf.call_tf_function (jax2tf.call_tf) 0.4.11 ..", _UNRUNNABLE,
                    (_T_GENERIC + "test_unrunnable_targets_name_what_they_need",)))
