"""`pip install --no-build-isolation ./python`: installs the pure-Python package and, when a
built librmacc is found (RMACC_LIB, or ../build/librmacc.so from scripts/build.sh), a copy of
it next to the package, so the installed package needs nothing else."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    env = os.environ.get("RMACC_LIB")
    for path in ([env] if env else []) + [os.path.join(HERE, "..", "build", "librmacc.so")]:
        if os.path.isfile(path):
            return os.path.realpath(path)
    return None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib is None:
            print("rmacc: no built librmacc found (RMACC_LIB, ../build); the installed package "
                  "will look for it through RMACC_LIB and the system")
            return
        dest = os.path.join(self.build_lib, "rmacc", "librmacc.so")
        print("rmacc: bundling %s" % lib)
        shutil.copyfile(lib, dest)


setup(cmdclass={"build_py": BuildPyWithLibrary})
