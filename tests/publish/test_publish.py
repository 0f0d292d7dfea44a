"""Publishing and AWX readiness, with the real tools.

- ansible-builder: ``create`` on both execution-environment files, the
  generated build context, ``introspect`` of the installed collection, the
  galaxy stage's install from the context, and the image's ssh settings as
  OpenSSH itself reads them;
- galaxy-importer (what Galaxy and Automation Hub run on upload) on the
  tarball ``ansible-galaxy collection build`` makes, offline;
- the role READMEs against the roles' argument specs;
- ``examples/awx/``: survey schema, survey variables against the argument
  specs, survey answers as AWX sends them through the real topology action,
  the job template settings, the credential type and the awx.awx module
  arguments.

Run once, in the lint part of ``scripts/test.sh`` (the tools live in the
ansible-core 2.19 venv). A missing tool skips outside CI and fails under CI.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))

from ci_policy import need  # noqa: E402

GALAXY = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
VERSION = GALAXY["version"]
TARBALL_NAME = f"{GALAXY['namespace']}-{GALAXY['name']}-{VERSION}.tar.gz"
AWX = REPO_ROOT / "examples" / "awx"
ROLES = ("preflight", "prebuild", "launch")


def tool(name: str) -> str:
    """A CLI of the venv running the tests, else from PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    need(found is not None, f"{name} not found: run scripts/bootstrap.sh (it installs it into the 2.19 venv)")
    return str(found)


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    # The tools must find the venv's own ansible CLIs (ansible-doc, ansible-lint).
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    full_env.update(env or {})
    proc = subprocess.run(argv, cwd=str(cwd) if cwd else None, env=full_env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    print(f"$ {' '.join(argv)}\n--- rc={proc.returncode}\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


def requirement_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    proc = run([tool("ansible-galaxy"), "collection", "build", str(REPO_ROOT), "--output-path", str(out), "--force"])
    assert proc.returncode == 0
    built = out / TARBALL_NAME
    assert built.is_file()
    return built


@pytest.fixture(scope="module")
def installed(tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("installed")
    proc = run([tool("ansible-galaxy"), "collection", "install", str(tarball), "-p", str(dest), "--offline", "--force"])
    assert proc.returncode == 0
    return dest


# --------------------------------------------------------------------------- execution environments


def test_meta_ee_create(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    proc = run([tool("ansible-builder"), "create", "-f", str(REPO_ROOT / "meta" / "execution-environment.yml"),
                "-c", str(ctx), "--output-filename", "Containerfile"])
    assert proc.returncode == 0
    assert "Complete!" in proc.stdout
    assert (ctx / "Containerfile").is_file()
    # The collection's own requirement files made it into the context unchanged.
    for name in ("requirements.txt", "bindep.txt"):
        copied = ctx / "_build" / name
        assert not copied.is_symlink(), f"{name} in the build context is a link: the image build cannot follow it"
        assert copied.read_text() == (REPO_ROOT / "meta" / f"ee-{name}").read_text()


def test_meta_ee_introspect_of_installed_collection(installed: Path) -> None:
    proc = run([tool("ansible-builder"), "introspect", str(installed)])
    assert proc.returncode == 0
    lines = requirement_lines(REPO_ROOT / "meta" / "ee-bindep.txt")
    assert lines
    for line in lines:
        assert f"{line}  # from collection flodl.cluster" in proc.stdout
    assert "openssh-client [platform:dpkg]" in proc.stdout
    # No Python needs beyond ansible-core's own.
    assert requirement_lines(REPO_ROOT / "meta" / "ee-requirements.txt") == []
    assert re.search(r"^python: \[\]$", proc.stdout, re.M)


@pytest.fixture(scope="module")
def user_ee_context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ansible-builder create`` on a copy of the user-facing file, ee/ prepared by scripts/ee-prepare.sh."""
    work = tmp_path_factory.mktemp("user-ee")
    shutil.copy(REPO_ROOT / "execution-environment.yml", work)
    shutil.copytree(REPO_ROOT / "ee", work / "ee", ignore=shutil.ignore_patterns("*.tar.gz", "requirements.yml"))
    shutil.copy(work / "ee" / "ssh_config", work / "ee" / "flodl-cluster-0.0.1.tar.gz")  # a stale tarball
    proc = run([str(REPO_ROOT / "scripts" / "ee-prepare.sh"), str(work / "ee")],
               env={"ANSIBLE_GALAXY": tool("ansible-galaxy")})
    assert proc.returncode == 0
    assert sorted(p.name for p in (work / "ee").glob("*.tar.gz")) == [TARBALL_NAME]  # the stale one is gone
    proc = run([tool("ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "ctx",
                "--output-filename", "Containerfile"], cwd=work)
    assert proc.returncode == 0
    return work / "ctx"


def test_user_ee_containerfile(user_ee_context: Path) -> None:
    text = (user_ee_context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="quay.io/centos/centos:stream9"' in text
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="(.*)"$', text, re.M)
    assert refs and "ansible-core>=2.19,<2.22" in refs.group(1) and "ansible-runner" in refs.group(1)
    assert re.search(r"ansible-galaxy collection install .*-r requirements.yml", text)
    # The collection's own needs come through introspection, next to the image's.
    assert "introspect --user-pip=requirements.txt --user-bindep=bindep.txt" in text
    assert "COPY _build/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts" in text
    assert "COPY _build/ssh/ssh_config /etc/ssh/ssh_config.d/50-flodl-cluster.conf" in text
    assert "ENV EE_SSH_KNOWN_HOSTS=/etc/ssh/ssh_known_hosts" in text
    build = user_ee_context / "_build"
    assert (build / "collections" / TARBALL_NAME).is_file()
    assert (build / "ssh" / "ssh_config").read_text() == (REPO_ROOT / "ee" / "ssh_config").read_text()
    reqs = yaml.safe_load((build / "requirements.yml").read_text())
    assert reqs["collections"] == [{"name": f"collections/{TARBALL_NAME}", "type": "file"}], (
        "scripts/ee-prepare.sh must name the tarball of galaxy.yml's version in ee/requirements.yml"
    )


def test_user_ee_galaxy_stage_installs_the_collection(user_ee_context: Path, tmp_path: Path) -> None:
    # What the image's galaxy stage runs, from the same directory (WORKDIR /build = _build).
    dest = tmp_path / "collections"
    proc = run([tool("ansible-galaxy"), "collection", "install", "-r", "requirements.yml", "-p", str(dest),
                "--offline"], cwd=user_ee_context / "_build")
    assert proc.returncode == 0
    manifest = json.loads((dest / "ansible_collections" / "flodl" / "cluster" / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == VERSION


def test_ee_ssh_config_checks_host_keys_strictly(tmp_path: Path) -> None:
    ssh = shutil.which("ssh")
    need(ssh is not None, "OpenSSH's client (apt-get install openssh-client)")
    known = tmp_path / "known_hosts"
    known.write_text("")
    proc = run([str(ssh), "-G", "-F", str(REPO_ROOT / "ee" / "ssh_config"), "gpu-a"],
               env={"EE_SSH_KNOWN_HOSTS": str(known)})
    assert proc.returncode == 0
    settings = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert settings["userknownhostsfile"].split()[0] == str(known)
    assert settings["stricthostkeychecking"] == "true"


# --------------------------------------------------------------------------- galaxy-importer


def test_galaxy_importer_accepts_the_tarball(tarball: Path, tmp_path: Path) -> None:
    try:
        import galaxy_importer  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        need(False, "galaxy-importer not installed: run scripts/bootstrap.sh")
    cfg = tmp_path / "galaxy-importer.cfg"
    # Offline: no ansible-test (it would pull a container), ansible-lint offline.
    cfg.write_text("[galaxy-importer]\nrun_ansible_test = False\nrun_ansible_lint = True\n"
                   "offline_ansible_lint = True\ncheck_changelog = True\n")
    work = tmp_path / "import"
    work.mkdir()
    shutil.copy(tarball, work)
    proc = run([sys.executable, "-m", "galaxy_importer.main", TARBALL_NAME], cwd=work,
               env={"GALAXY_IMPORTER_CONFIG": str(cfg)}, timeout=600)
    assert proc.returncode == 0
    output = proc.stdout + proc.stderr
    assert "Importer processing completed successfully" in output
    assert not re.search(r"^(ERROR|CRITICAL)\b", output, re.M)
    result = json.loads((work / "importer_result.json").read_text())
    roles = {c["content_name"]: c for c in result["docs_blob"]["contents"] if c["content_type"] == "role"}
    assert sorted(roles) == sorted(ROLES)
    assert all(c["readme_file"] == "README.md" and c["readme_html"] for c in roles.values())


def argument_spec_options(role: str) -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load((REPO_ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("role", ROLES)
def test_role_readme_names_every_option(role: str) -> None:
    readme = (REPO_ROOT / "roles" / role / "README.md").read_text()
    assert readme.startswith(f"# flodl.cluster.{role}\n")
    missing = [name for name in argument_spec_options(role) if f"`{name}`" not in readme]
    assert not missing, f"roles/{role}/README.md does not document {missing}"
    assert "## Example" in readme


# --------------------------------------------------------------------------- AWX as code

AWX_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}
SURVEY = json.loads((AWX / "survey.json").read_text())
ALL_OPTIONS: dict[str, dict[str, Any]] = {}
for _role in ROLES:
    for _name, _opt in argument_spec_options(_role).items():
        ALL_OPTIONS.setdefault(_name, _opt)


def test_survey_spec_is_valid_awx() -> None:
    assert SURVEY["name"] and isinstance(SURVEY["description"], str)
    spec = SURVEY["spec"]
    assert spec, "an empty survey"
    names = [q["variable"] for q in spec]
    assert len(names) == len(set(names)), "a variable asked twice"
    for q in spec:
        where = q["variable"]
        assert q["type"] in AWX_TYPES, where
        assert isinstance(q["required"], bool) and q["question_name"], where
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", q["variable"]), where
        if q["type"] in {"multiplechoice", "multiselect"}:
            assert isinstance(q["choices"], list) and all(isinstance(c, str) for c in q["choices"]), where
            assert q["default"] in q["choices"], where
        if q["type"] in {"text", "textarea"}:
            assert isinstance(q["default"], str), where
            assert len(q["default"]) <= q["max"], where
            if q["default"]:
                assert q["min"] <= len(q["default"]), where
        if q["type"] in {"integer", "float"}:
            number = int if q["type"] == "integer" else (int, float)
            # AWX refuses a numeric question whose default is not a number.
            assert isinstance(q["default"], number) and not isinstance(q["default"], bool), where
            assert q["min"] <= q["default"] <= q["max"], where
        if q["required"] and q["type"] != "password" and q["default"] == "":
            # Nothing to pre-fill: the operator must answer (min forces a non-blank answer).
            assert q["min"] >= 1, where


@pytest.mark.parametrize("question", SURVEY["spec"], ids=lambda q: q["variable"])
def test_survey_variable_is_a_documented_role_option(question: dict[str, Any]) -> None:
    name = question["variable"]
    assert name in ALL_OPTIONS, f"{name} is in no role's meta/argument_specs.yml"
    option = ALL_OPTIONS[name]
    kind = option.get("type", "str")
    if kind == "bool":
        assert question["type"] == "multiplechoice" and sorted(question["choices"]) == ["false", "true"]
        assert question["default"] == str(option.get("default", True)).lower()
    elif kind in {"int", "float"}:
        assert question["type"] in {"integer", "float", "text"}
        if "default" in option:
            assert float(question["default"]) == float(option["default"])
    if "choices" in option:
        assert set(question["choices"]) <= {str(c) for c in option["choices"]}
    docs = (REPO_ROOT / "docs" / "awx.md").read_text()
    assert f"`{name}`" in docs, f"docs/awx.md does not explain the survey's {name}"


def survey_answers(**override: Any) -> dict[str, Any]:
    """Every answer as AWX puts it in extra vars: text and choices as strings."""
    answers: dict[str, Any] = {}
    for q in SURVEY["spec"]:
        answers[q["variable"]] = q["default"]
    answers["flodl_cmd"] = "train"
    answers.update(override)
    return answers


def run_topology(installed: Path, tmp_path: Path, extra_vars: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The real validation (no host is contacted) with the answers as extra vars."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"flodl_controller_host": "127.0.0.1", "flodl_controller_path": str(tmp_path)},
        "children": {"flodl_workers": {"hosts": {"gpu-a": {
            "flodl_path": str(tmp_path), "flodl_local_devices": [0, 1], "flodl_arch": "precompiled/cu128"}}}},
    }}))
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Validate as the AWX job would", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Validate", "flodl.cluster.topology": {"phases": ["preflight", "prebuild", "launch"]}}],
    }], sort_keys=False))
    extra = tmp_path / "extra_vars.json"
    extra.write_text(json.dumps(extra_vars))
    env = {
        "ANSIBLE_COLLECTIONS_PATH": str(installed), "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
        "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
    }
    env_clean = {k: v for k, v in os.environ.items() if k != "FLODL_NET_TIMEOUT_SCALE"}
    env_clean.update(env)
    return subprocess.run(
        [tool("ansible-playbook"), "-i", str(inventory), str(playbook), "-e", f"@{extra}"],
        cwd=str(tmp_path), env=env_clean, capture_output=True, text=True, timeout=300, check=False,
    )


@pytest.mark.parametrize("override", [
    {},
    {"flodl_prebuild": "false"},
    {"flodl_net_timeout_scale": "2.5", "flodl_fdl_env": "lab", "flodl_launch_grace_seconds": "30"},
    {"flodl_launch_grace_seconds": 30.0},
], ids=["defaults", "no-prebuild", "all-strings", "float-answer"])
def test_survey_answers_are_accepted(installed: Path, tmp_path: Path, override: dict[str, Any]) -> None:
    proc = run_topology(installed, tmp_path, survey_answers(**override))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_bad_survey_answer_is_refused_before_any_host(installed: Path, tmp_path: Path) -> None:
    # Guards the test above: the same path does refuse what the collection must refuse.
    proc = run_topology(installed, tmp_path, survey_answers(flodl_net_timeout_scale="0.01"))
    assert proc.returncode != 0
    assert "flodl_net_timeout_scale" in proc.stdout


def test_blank_net_timeout_scale_means_unset(installed: Path, tmp_path: Path) -> None:
    proc = run_topology(installed, tmp_path, survey_answers(flodl_net_timeout_scale=""))
    assert proc.returncode == 0, proc.stdout


CONFIGURE = yaml.safe_load((AWX / "configure.yml").read_text())
TASKS = CONFIGURE[0]["tasks"]


def awx_tasks(module: str) -> list[dict[str, Any]]:
    return [t[f"awx.awx.{module}"] for t in TASKS if f"awx.awx.{module}" in t]


def test_train_job_template_settings() -> None:
    train = next(t for t in awx_tasks("job_template") if t["playbook"] == "train.yml")
    assert train["allow_simultaneous"] is False
    assert train["job_slice_count"] == 1 and train["ask_job_slice_count_on_launch"] is False
    assert train["ask_limit_on_launch"] is False
    assert train["survey_enabled"] is True
    assert "survey.json" in CONFIGURE[0]["vars"]["awx_flodl_survey"]
    assert train["survey_spec"] == "{{ awx_flodl_survey }}"
    for template in awx_tasks("job_template"):
        assert (AWX / "project" / template["playbook"]).is_file()
        assert template["allow_simultaneous"] is False and template["job_slice_count"] == 1
        assert set(template["credentials"]) == {c["name"] for c in awx_tasks("credential")}


def test_the_detached_workflow_chains_start_status_and_teardown() -> None:
    templates = {t["name"]: t for t in awx_tasks("job_template")}
    (workflow,) = awx_tasks("workflow_job_template")
    nodes = {n["identifier"]: n for n in workflow["workflow_nodes"]}
    assert all(n["unified_job_template"]["name"] in templates for n in nodes.values())
    start = templates[nodes["start"]["unified_job_template"]["name"]]
    # A detached run outlives the job: it must not ride the job's forwarded agent (refused before contact).
    assert start["extra_vars"] == {"flodl_launch_detach": True, "flodl_launch_forward_agent": False}
    assert nodes["start"]["related"]["success_nodes"] == [{"identifier": "status"}]
    status = templates[nodes["status"]["unified_job_template"]["name"]]
    assert status["playbook"] == "status.yml" and status["ask_variables_on_launch"] is True
    assert nodes["status"]["related"]["always_nodes"] == [{"identifier": "teardown"}]
    assert templates[nodes["teardown"]["unified_job_template"]["name"]]["playbook"] == "teardown.yml"
    assert "flodl_status_wait_seconds" in workflow["extra_vars"]


def test_inventory_source_uses_the_fdl_cluster_plugin() -> None:
    (source,) = awx_tasks("inventory_source")
    assert source["source"] == "scm"
    path = CONFIGURE[0]["vars"]["awx_flodl_inventory_source_path"]
    assert source["source_path"] == "{{ awx_flodl_inventory_source_path }}"
    assert path.endswith(".fdl_cluster.yml")
    assert yaml.safe_load((AWX / "project" / path).read_text())["plugin"] == "flodl.cluster.fdl_cluster"


def test_known_hosts_credential_type_matches_the_image() -> None:
    (ctype,) = yaml.safe_load((AWX / "credential_types.yml").read_text())["flodl_awx_credential_types"]
    fields = {f["id"] for f in ctype["inputs"]["fields"]}
    assert set(ctype["inputs"]["required"]) <= fields
    (template,) = ctype["injectors"]["file"].values()
    assert template.strip("{} ") in fields
    file_id = next(iter(ctype["injectors"]["file"])).split(".", 1)[1]
    env = ctype["injectors"]["env"]
    assert env == {"EE_SSH_KNOWN_HOSTS": f"{{{{ tower.filename.{file_id} }}}}"}
    # The image's ssh client reads exactly that variable.
    assert "${EE_SSH_KNOWN_HOSTS}" in (REPO_ROOT / "ee" / "ssh_config").read_text()
    used = {c["credential_type"] for c in awx_tasks("credential")}
    assert used == {"Machine", ctype["name"]}


def test_configure_uses_only_real_awx_module_options() -> None:
    try:
        import ansible_collections.awx.awx.plugins.modules as awx_modules  # pylint: disable=import-outside-toplevel
    except ImportError:
        need(False, "awx.awx (the `ansible` package) is not installed: run scripts/bootstrap.sh")
    modules_dir = Path(awx_modules.__path__[0])
    checked = 0
    for task in TASKS:
        module = next((k for k in task if k.startswith("awx.awx.")), None)
        if module is None:
            continue
        doc = (modules_dir / f"{module.rsplit('.', 1)[1]}.py").read_text()
        documentation = yaml.safe_load(re.search(r"DOCUMENTATION = r?'''(.*?)'''", doc, re.S).group(1))
        known = set(documentation["options"])
        for option in documentation["options"].values():
            known.update(option.get("aliases", []))
        unknown = set(task[module]) - known
        assert not unknown, f"{task['name']}: {module} has no option {sorted(unknown)}"
        checked += 1
    assert checked >= 9


def test_lint_mocks_every_awx_module_the_examples_use() -> None:
    # Plain `ansible-lint` in a checkout without awx.awx resolves these through .ansible-lint's stubs.
    mocked = set(yaml.safe_load((REPO_ROOT / ".ansible-lint").read_text())["mock_modules"])
    used = {k for task in TASKS for k in task if k.startswith("awx.awx.")}
    assert used and used <= mocked, f"add {sorted(used - mocked)} to mock_modules in .ansible-lint"


def run_configure_checks(tmp_path: Path, extra_vars: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """configure.yml's own play with its awx.awx tasks left out (no AWX here): its checks and derived vars, for real."""
    play = dict(CONFIGURE[0])
    play["vars_files"] = [str(AWX / f) for f in play.get("vars_files", [])]
    play["vars"] = {**play["vars"], "awx_flodl_survey": {}}
    play["tasks"] = [t for t in TASKS if not any(k.startswith("awx.awx.") for k in t)] + [
        {"name": "Show", "ansible.builtin.debug": {"msg": "INVENTORY_VARS={{ awx_flodl_inventory_vars | to_json }}"}}]
    playbook = tmp_path / "configure_checks.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    base = {"awx_flodl_project_url": "https://git.invalid/p.git", "awx_flodl_ee_image": "ee:1",
            "awx_flodl_worker_key_file": "/nonexistent", "awx_flodl_known_hosts_file": "/nonexistent"}
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({**base, **extra_vars}))
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    return subprocess.run([tool("ansible-playbook"), str(playbook), "-e", f"@{extra}"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_configure_adds_the_launch_and_build_hosts_and_names_them() -> None:
    hosts = next(t for t in TASKS if "awx.awx.host" in t)
    assert hosts["loop"] == "{{ awx_flodl_hosts | dict2items }}"
    assert hosts["awx.awx.host"]["inventory"] == next(iter(awx_tasks("inventory")))["name"]
    (inventory,) = awx_tasks("inventory")
    assert inventory["variables"] == "{{ awx_flodl_inventory_vars }}"


@pytest.mark.parametrize(("given", "expected"), [
    ({}, {}),
    ({"awx_flodl_hosts": {"ctl": {"ansible_host": "10.0.0.10"}}, "awx_flodl_launch_host": "ctl",
      "awx_flodl_build_host": ""}, {"flodl_launch_host": "ctl"}),
    ({"awx_flodl_hosts": {"ctl": {"ansible_host": "10.0.0.10"}, "bld": {"ansible_host": "10.0.0.11"}},
      "awx_flodl_launch_host": "ctl", "awx_flodl_build_host": "bld"},
     {"flodl_launch_host": "ctl", "flodl_build_host": "bld"}),
], ids=["none", "launch-only-blank-build", "both"])
def test_configure_inventory_vars_name_only_the_hosts_given(tmp_path: Path, given: dict[str, Any],
                                                            expected: dict[str, Any]) -> None:
    proc = run_configure_checks(tmp_path, given)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "INVENTORY_VARS=" in ln)
    assert json.loads(line.split("INVENTORY_VARS=", 1)[1].rstrip('"').replace('\\"', '"')) == expected


def test_configure_refuses_a_launch_host_it_does_not_declare(tmp_path: Path) -> None:
    proc = run_configure_checks(tmp_path, {"awx_flodl_launch_host": "ctl"})
    assert proc.returncode != 0
    assert "awx_flodl_launch_host=ctl names no host of awx_flodl_hosts" in proc.stdout
