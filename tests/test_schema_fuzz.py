"""Hostile input: schemathesis fuzzes every operation of the native API's OpenAPI schema
(/api/schema: /api/volume/*, /api/v1/*, /api/quota, /api/instances*) against a live hub, with a
write token, valid and invalid (negative) inputs alike. Each response must not be a 5xx and must be
what the schema promises: a documented status code, the documented content type, a body matching
the documented shape.

The hub under test is an embedded one (SQLite + local object directory) of this module's own, so
the junk the fuzzer writes stays out of the other tests' servers. The schema, the views and the
validation are the same Python on every backend; the store-specific paths (presigned redirects,
S3 errors) are covered by the backend-parametrized tests and tests/test_faults.py.

The numbers (operations and examples run) are printed by the last test, for SECURITY.md."""
from __future__ import annotations

import collections
import contextlib
import io

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.servers import Hub, base_env

# Examples per operation: valid inputs, then inputs that break the schema (wrong types, missing
# fields, out-of-range numbers, odd strings). Derandomized: every run sends the same requests.
POSITIVE_EXAMPLES = 20
NEGATIVE_EXAMPLES = 10
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]


def _operation_ids() -> list[str]:
    """Every operationId of the schema, generated in-process at collection (the live server it is
    fuzzed on starts later); test_the_live_schema_has_the_same_operations ties the two together."""
    from drf_spectacular.generators import SchemaGenerator

    with contextlib.redirect_stderr(io.StringIO()):  # drf-spectacular's enum-naming warnings
        schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(op["operationId"] for ops in schema["paths"].values() for op in ops.values())


# operationId -> why it is not fuzzed.
EXCLUDED = {"schema_retrieve": "drf-spectacular's own view serving this schema, not the hub's code"}
OPERATIONS = [op for op in _operation_ids() if op not in EXCLUDED]

# operationId -> examples sent; status class ("2xx", "4xx") -> responses: for the summary
RUN: dict[str, int] = collections.Counter()
STATUSES: dict[str, int] = collections.Counter()


@pytest.fixture(scope="module")
def fuzz_hub(tmp_path_factory):
    data = tmp_path_factory.mktemp("fuzz")
    # Mirror jobs the fuzzer starts must not reach out to the internet: their default upstream refuses.
    hub = Hub("fuzz", base_env() | {"HUB_DATA_DIR": str(data), "HUB_MIRROR_UPSTREAM": "http://127.0.0.1:9"}, data)
    hub.start(data / "server.log")
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def fuzz_token(fuzz_hub) -> str:
    token = fuzz_hub.token("fuzzer")
    # Something to find: files and a directory in the volume, a public model repo with a file.
    h = {"Authorization": f"Bearer {token}"}
    for path in ("a/b.txt", "0", "x"):
        requests.put(f"{fuzz_hub.url}/api/volume/files/{path}", data=b"fuzz", headers=h, timeout=30).raise_for_status()
    api = fuzz_hub.api(token)
    api.create_repo("fuzzer/model")
    api.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="fuzzer/model")
    return token


@pytest.fixture(scope="module")
def native_schema(fuzz_hub):
    schema = schemathesis.openapi.from_url(f"{fuzz_hub.url}/api/schema?format=json")
    schema.config.update(base_url=fuzz_hub.url, request_timeout=30)
    return schema


def test_the_live_schema_has_the_same_operations(native_schema):
    ids = {r.ok().definition.raw["operationId"] for r in native_schema.get_all_operations()}
    assert ids - set(EXCLUDED) == set(OPERATIONS)
    assert len(OPERATIONS) >= 20


@pytest.mark.parametrize("operation_id", OPERATIONS)
def test_operation_holds_to_its_schema(native_schema, fuzz_token, operation_id):
    operation = native_schema.find_operation_by_id(operation_id)
    headers = {"Authorization": f"Bearer {fuzz_token}"}
    session = requests.Session()
    for mode, examples in ((GenerationMode.POSITIVE, POSITIVE_EXAMPLES),
                           (GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES)):
        @given(case=operation.as_strategy(mode))
        @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
        def fuzz(case) -> None:
            RUN[operation_id] += 1
            response = case.call_and_validate(headers=headers, session=session, checks=CHECKS)
            STATUSES[f"{response.status_code // 100}xx"] += 1

        fuzz()


def test_zz_fuzz_counts(capsys):
    """Prints how many operations and examples ran (after the fuzz tests: pytest keeps file order)."""
    if not RUN:
        pytest.skip("the fuzz tests did not run in this session")
    with capsys.disabled():
        print(f"\nschemathesis: {len(RUN)} operations, {sum(RUN.values())} examples, responses "
              f"{dict(sorted(STATUSES.items()))} ({', '.join(f'{k} {v}' for k, v in sorted(RUN.items()))})")
