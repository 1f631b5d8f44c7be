#!/usr/bin/python3
"""Each client installed the way its ecosystem installs packages, into a fresh project, as
docs/clients.md says; then that page's example for the language runs against two real servers.

    packages_test.py [PythonPackageTest|NodePackageTest|JavaPackageTest|GoPackageTest|...]

Nothing is fetched from a network: pip installs with --no-index, npm from the packed tarball,
Maven from Debian's packaged plugins (/usr/share/maven-repo, as a file:// mirror), Go with
GOPROXY=off and a replace directive.
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sekka_testlib import REPO, SEKKA, Server, TempDirs  # noqa: E402

CLIENTS = os.path.join(REPO, "clients")
DOCS = os.path.join(REPO, "docs", "clients.md")
EXAMPLE_SERVERS = ("127.0.0.1:6380", "127.0.0.1:6381")


def example(language):
    """The code block that follows `<!-- example: LANGUAGE -->` in docs/clients.md."""
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- example: %s -->\n```\w+\n(.*?)```" % re.escape(language), text, re.S)
    if m is None:
        raise AssertionError(f"docs/clients.md has no example for {language}")
    return m.group(1)


def run(args, cwd, env=None, timeout=300):
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def copy_tree(src, dst, ignore=("build", "node_modules", "dist", "target", "__pycache__")):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*ignore, "*.egg-info"))
    return dst


class PackageTestCase(unittest.TestCase):
    """Two servers with a segment tag "invoice", as the examples expect."""

    @classmethod
    def setUpClass(cls):
        cls.dirs = TempDirs()
        store = "sqlite:" + cls.dirs.path("segments.db")
        run([SEKKA, "segment", "create", "invoice", "--step", "1000", "--segment-store", store],
            cwd=cls.dirs.root)
        cls.servers = [Server(cls.dirs.path(f"s{i}"), "--worker-source", "static",
                              "--worker-id", str(i + 1), "--segment-store", store)
                       for i in range(2)]

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()
        cls.dirs.cleanup()

    def setUp(self):
        self.work = TempDirs()
        self.addCleanup(self.work.cleanup)

    def example(self, language):
        code = example(language)
        for documented, real in zip(EXAMPLE_SERVERS, self.servers):
            code = code.replace(documented, real.resp)
        return code

    def assert_printed_ids(self, out):
        """The examples print the snowflake id, then the invoice number."""
        words = [w.rstrip("n") for w in out.split()]  # JavaScript prints a BigInt as 12n
        self.assertGreaterEqual(len(words), 2, out)
        self.assertGreater(int(words[0]), 0, out)
        self.assertGreater(int(words[1]), 0, out)


class PythonPackageTest(PackageTestCase):
    def test_wheel_and_sdist_install_into_fresh_virtual_environments(self):
        src = copy_tree(os.path.join(CLIENTS, "python"), self.work.path("src"))
        dist = self.work.path("dist")
        run(["/usr/bin/python3", "-m", "build", "--no-isolation", "--outdir", dist, src],
            cwd=self.work.root)
        wheel = [f for f in os.listdir(dist) if f.endswith(".whl")]
        sdist = [f for f in os.listdir(dist) if f.endswith(".tar.gz")]
        self.assertEqual(len(wheel), 1, os.listdir(dist))
        self.assertEqual(len(sdist), 1, os.listdir(dist))
        script = self.work.path("example.py")
        with open(script, "w") as f:
            f.write(self.example("python"))
        # The sdist is built into a wheel on install, which needs setuptools and wheel in the
        # environment: with no index to fetch them from, its venv sees Debian's python3-wheel.
        for name, package, flags in (("wheel", wheel[0], []),
                                     ("sdist", sdist[0], ["--system-site-packages"])):
            with self.subTest(package=name):
                venv = self.work.path(f"venv-{name}")
                run(["/usr/bin/python3", "-m", "venv", *flags, venv], cwd=self.work.root)
                run([f"{venv}/bin/pip", "install", "--no-index", "--no-build-isolation",
                     os.path.join(dist, package)], cwd=self.work.root)
                self.assert_printed_ids(run([f"{venv}/bin/python", script], cwd=self.work.root))


class NodePackageTest(PackageTestCase):
    def test_npm_tarball_installs_and_its_types_check(self):
        src = copy_tree(os.path.join(CLIENTS, "node"), self.work.path("src"))
        tarball = run(["npm", "pack", "--silent"], cwd=src).strip().splitlines()[-1]
        packed = run(["tar", "tzf", os.path.join(src, tarball)], cwd=src).split()
        self.assertIn("package/index.d.ts", packed)
        self.assertNotIn("package/conformance-driver.mjs", packed)
        app = self.work.path("app")
        os.mkdir(app)
        with open(os.path.join(app, "package.json"), "w") as f:
            f.write('{"name": "app", "version": "1.0.0", "private": true, "type": "module"}\n')
        run(["npm", "install", "--offline", "--no-audit", "--no-fund",
             os.path.join(src, tarball)], cwd=app)
        with open(os.path.join(app, "example.mjs"), "w") as f:
            f.write(self.example("node"))
        self.assert_printed_ids(run(["node", "example.mjs"], cwd=app))
        # The types, as a TypeScript user sees them: a misuse is an error the types catch.
        with open(os.path.join(app, "check.ts"), "w") as f:
            f.write(
                "import { Client, ClosedError, NoServerError, SekkaError } from 'sekka-client';\n"
                "const c = new Client({ servers: ['127.0.0.1:6380'], timeout: 500 });\n"
                "const id: Promise<bigint> = c.nextId();\n"
                "const text: Promise<string> = c.nextIdString();\n"
                "const tag: Promise<bigint> = c.next('invoice');\n"
                "const served: number = c.stats().served;\n"
                "const errors: SekkaError[] = [new NoServerError('x'), new ClosedError()];\n"
                "// @ts-expect-error: servers is a list or a string\n"
                "new Client({ servers: 5 });\n"
                "// @ts-expect-error: ids are bigint, never number\n"
                "const wrong: Promise<number> = c.nextId();\n"
                "export { id, text, tag, served, errors, wrong };\n")
        run(["tsc", "--noEmit", "--strict", "--target", "es2020", "--module", "nodenext",
             "--moduleResolution", "nodenext", "--lib", "es2020,dom", "check.ts"], cwd=app)


MAVEN_SETTINGS = """<settings>
  <localRepository>%s</localRepository>
  <mirrors>
    <mirror><id>debian</id><mirrorOf>*</mirrorOf><url>file:///usr/share/maven-repo</url></mirror>
  </mirrors>
</settings>
"""

APP_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId>
  <artifactId>app</artifactId>
  <version>1.0</version>
  <properties><maven.compiler.release>17</maven.compiler.release></properties>
  <dependencies>
    <dependency>
      <groupId>io.sekka</groupId>
      <artifactId>sekka-client</artifactId>
      <version>0.1.0</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.10.1</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.0</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-jar-plugin</artifactId><version>3.3.0</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId><version>2.22.3</version></plugin>
    </plugins>
  </build>
</project>
"""


class JavaPackageTest(PackageTestCase):
    def test_mvn_install_then_a_fresh_project_depends_on_it(self):
        repo = self.work.path("m2")
        settings = self.work.path("settings.xml")
        with open(settings, "w") as f:
            f.write(MAVEN_SETTINGS % repo)
        src = copy_tree(os.path.join(CLIENTS, "java"), self.work.path("src"))
        run(["mvn", "-B", "-q", "-s", settings, "install"], cwd=src)
        jar = os.path.join(repo, "io", "sekka", "sekka-client", "0.1.0", "sekka-client-0.1.0.jar")
        self.assertTrue(os.path.exists(jar), "mvn install put no jar in the local repository")
        app = self.work.path("app")
        os.makedirs(os.path.join(app, "src", "main", "java"))
        with open(os.path.join(app, "pom.xml"), "w") as f:
            f.write(APP_POM)
        with open(os.path.join(app, "src", "main", "java", "Example.java"), "w") as f:
            f.write(self.example("java"))
        run(["mvn", "-B", "-q", "-s", settings, "package"], cwd=app)
        classpath = os.path.join(app, "target", "classes") + ":" + jar
        self.assert_printed_ids(run(["java", "-cp", classpath, "Example"], cwd=app))


class GoPackageTest(PackageTestCase):
    def test_a_fresh_module_uses_the_client_by_its_path(self):
        app = self.work.path("app")
        os.mkdir(app)
        env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local",
                   GOCACHE=self.work.path("gocache"), GOPATH=self.work.path("gopath"))
        run(["go", "mod", "init", "example.com/app"], cwd=app, env=env)
        run(["go", "mod", "edit", "-require=sekka.dev/go/sekka@v0.0.0",
             "-replace=sekka.dev/go/sekka=" + os.path.join(CLIENTS, "go")], cwd=app, env=env)
        with open(os.path.join(app, "main.go"), "w") as f:
            f.write(self.example("go"))
        self.assert_printed_ids(run(["go", "run", "."], cwd=app, env=env))


# The documented lines and a project's two required ones, nothing more (issue 43: this set
# CMAKE_CXX_STANDARD 20 itself, and the documented lines failed on g++ 12 without it).
CPP_PROJECT = """cmake_minimum_required(VERSION 3.25)
project(app CXX)
find_package(sekka 0.1 REQUIRED)
add_executable(example example.cc)
target_link_libraries(example PRIVATE sekka::client)
"""


class CppPackageTest(PackageTestCase):
    def test_cmake_install_then_find_package_in_a_fresh_project(self):
        build = os.path.dirname(os.path.dirname(os.path.abspath(SEKKA)))  # build/cli/sekka
        prefix = self.work.path("prefix")
        run(["cmake", "--install", build, "--component", "dev", "--prefix", prefix],
            cwd=self.work.root)
        app = self.work.path("app")
        os.mkdir(app)
        with open(os.path.join(app, "CMakeLists.txt"), "w") as f:
            f.write(CPP_PROJECT)
        with open(os.path.join(app, "example.cc"), "w") as f:
            f.write(self.example("cpp"))
        # The Debian package's tree puts the files under usr/ (scripts/package.sh configures
        # the build so), a plain one right under the prefix: either is found.
        run(["cmake", "-S", app, "-B", os.path.join(app, "build"),
             f"-DCMAKE_PREFIX_PATH={prefix};{prefix}/usr"], cwd=app)
        run(["cmake", "--build", os.path.join(app, "build")], cwd=app)
        self.assert_printed_ids(run([os.path.join(app, "build", "example")], cwd=app))


if __name__ == "__main__":
    unittest.main(verbosity=2)
