"""Test aids shipped with mtensor."""
