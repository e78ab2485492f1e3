"""The engine refuses a number as DynamoDB does, whichever way it checks it (``engine.checks``:
a plain integer of up to 38 digits is taken at once; anything else is read as a decimal).
"""

from __future__ import annotations

from typing import Any

import pytest

from sessionstore.engine import checks

TAKEN = [
    "0",
    "-0",
    "7",
    "-12",
    "9" * 38,
    "-" + "9" * 38,
    "0" * 10 + "1" * 38,  # 48 characters, 38 significant digits
    "1" * 38 + "0" * 50,  # trailing zeros are not significant
    "1.5",
    "1e125",
    "-1E-130",
    "1" + "0" * 125,
]
REFUSED = {
    "9" * 39: "Attempting to store more than 38 significant digits in a Number",
    "1" * 39: "Attempting to store more than 38 significant digits in a Number",
    "1e126": "Number overflow. Attempting to store a number with magnitude larger than "
    "supported range",
    "1e-131": "Number underflow. Attempting to store a number with magnitude smaller than "
    "supported range",
    "12a": "The parameter cannot be converted to a numeric value: 12a",
    "": "The parameter cannot be converted to a numeric value: ",
    "NaN": "The parameter cannot be converted to a numeric value: NaN",
    "-": "The parameter cannot be converted to a numeric value: -",
    "1 ": None,  # Decimal reads surrounding spaces; the plain-integer pattern does not match
}


@pytest.mark.parametrize("text", TAKEN)
def test_a_number_dynamodb_takes_is_taken(text: str) -> None:
    assert checks.value_problem({"N": text}) is None


@pytest.mark.parametrize(("text", "message"), REFUSED.items())
def test_a_number_dynamodb_refuses_is_refused_with_its_message(text: str, message: Any) -> None:
    assert checks.value_problem({"N": text}) == message


def test_numbers_through_the_engine(client: Any, table: str) -> None:
    key = {"pk": {"S": "numbers"}, "sk": {"S": "a"}}
    client.put_item(TableName=table, Item={**key, "n": {"N": "9" * 38}})
    with pytest.raises(client.exceptions.ClientError) as caught:
        client.put_item(TableName=table, Item={**key, "n": {"N": "9" * 39}})
    assert "38 significant digits" in caught.value.response["Error"]["Message"]
    item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert item["n"] == {"N": "9" * 38}
