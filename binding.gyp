{
  "targets": [
    {
      "target_name": "halrt",
      "sources": ["<!@(node scripts/sources.js runtime napi)"],
      "include_dirs": ["src", "include"],
      "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"],
      "cflags_c": ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"],
      "cflags!": ["-fno-exceptions"],
      "libraries": ["-ldl", "-lpthread", "-lm"],
      "conditions": [
        ["OS=='mac'", {"xcode_settings": {"OTHER_CFLAGS": ["-std=c11", "-Wall", "-Wextra", "-Werror"]}}]
      ]
    }
  ],
  "conditions": [
    # The benchmarks' reference addon (bench/run.js); bench/ is not published,
    # so an installed package builds only the halrt target.
    ["<!(node -p \"+require('fs').existsSync('bench/ref/ref_addon.c')\")==1", {
      "targets": [
        {
          "target_name": "halrt_bench_ref",
          "sources": ["bench/ref/ref_addon.c"],
          "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"],
          "cflags_c": ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"],
          "libraries": ["-lpthread"]
        }
      ]
    }]
  ]
}
