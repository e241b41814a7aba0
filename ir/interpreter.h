// (being written) Interpreter: runs IR nodes through the real ATen operators.
#pragma once
