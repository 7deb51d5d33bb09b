"""The one compiled part: the KRaft metadata log's batch walk (capture/kraft/_batch_walk.c).
Optional: where no C compiler is, the same reading runs in Python, slower (BENCHMARKS.md B7)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "zkcdc.capture.kraft._batch_walk",
            sources=["capture/kraft/_batch_walk.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
