# lit configuration for Loom's IR tests: loom-opt and loom on PATH with
# FileCheck and friends from LLVM 22; %models names the bundled models.
import os

import lit.formats

config.name = "Loom"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "compare_checkpoints.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test", "lit")

path = config.loom_tools_dirs + [config.llvm_tools_dir,
                                 config.environment.get("PATH", os.environ["PATH"])]
config.environment["PATH"] = os.pathsep.join(path)
config.substitutions.append(("%models", os.path.join(config.loom_src_root, "models")))
