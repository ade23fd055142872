"""An explicit delta with risk fnr is refused with the reason, on the CLI and over HTTP
(conformal risk control bounds an expectation over calibration draws: no PAC form here);
the default delta, or 0, is accepted and unused. No Neo4j: both refuse before any search."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from cpr_neo4j.cli.main import cli
from cpr_neo4j.serve.schemas import AskRequest


def test_cli_refuses_an_explicit_delta_with_fnr():
    r = CliRunner().invoke(cli, ["ask", "who directed [X]", "--risk", "fnr", "--delta", "0.05"])
    assert r.exit_code != 0
    text = r.output + str(r.exception or "")
    assert "--delta=0.05" in text and "only risk coverage gives" in text, text


def test_http_refuses_a_delta_field_with_fnr_and_speaks_of_fields():
    with pytest.raises(ValidationError) as err:
        AskRequest(question="who directed [X]", risk="fnr", delta=0.1)
    msg = str(err.value)
    assert "delta=0.1" in msg and "leave delta out" in msg and "--delta" not in msg
    assert AskRequest(question="q", risk="fnr").delta == 0.05  # the default: unused, fine
    assert AskRequest(question="q", risk="fnr", delta=0).delta == 0
    assert AskRequest(question="q", delta=0.1).delta == 0.1  # coverage: PAC
